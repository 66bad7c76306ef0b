"""Hit and miss accounting shared by the cache and the decorator.

Kept apart from both so that neither specialist owns it: it is finished at the base state.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class CacheInfo:
    """A snapshot of a memoized function's cache; frozen so callers cannot fake the counters."""

    hits: int
    misses: int
    maxsize: int
    currsize: int

    @property
    def hit_rate(self) -> float:
        """Share of calls answered from the cache; 0.0 before the first call."""
        calls = self.hits + self.misses
        return self.hits / calls if calls else 0.0


def format_info(info: CacheInfo) -> str:
    """One line for logs, stable enough to compare in tests."""
    return (
        f"hits={info.hits} misses={info.misses} "
        f"size={info.currsize}/{info.maxsize} hit_rate={info.hit_rate:.2f}"
    )
