"""The producer side: a bounded mapping that forgets its least recently used entry, and call keys.

`minicache.api` builds on both, so their behaviour is a contract: `get` refreshes recency,
`put` evicts exactly one oldest entry when full, and `make_key` maps equal calls to equal keys.
"""

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

# Separates positional from keyword parts so f(("a", 1)) and f(a=1) never share a key.
_KWARGS_MARK = ("<kwargs>",)


class LRUCache:
    """A mapping with at most `maxsize` entries; the least recently used one goes first."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self.evictions = 0
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        # Membership tests must not count as a use, or probing would change eviction order.
        return key in self._data

    def keys(self) -> list:
        """Keys from least to most recently used."""
        return list(self._data)

    def get(self, key: Hashable, default: Any = None) -> Any:
        """Return the value for `key` (marking it most recently used), or `default`."""
        raise NotImplementedError("LRUCache.get is not written yet")

    def put(self, key: Hashable, value: Any) -> None:
        """Store `value` as the most recently used entry, evicting the oldest one when full."""
        raise NotImplementedError("LRUCache.put is not written yet")

    def clear(self) -> None:
        """Forget every entry; the eviction counter is kept because it describes history."""
        raise NotImplementedError("LRUCache.clear is not written yet")


def make_key(args: tuple, kwargs: dict, typed: bool = False) -> tuple:
    """A hashable key for a call; with `typed`, 1 and 1.0 (or True and 1) give different keys."""
    raise NotImplementedError("make_key is not written yet")
