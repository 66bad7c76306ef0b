"""The consumer side: `memoize`, a decorator that caches results in a `minicache.core.LRUCache`."""

from collections.abc import Callable
from typing import Any

from minicache.core import LRUCache, make_key  # noqa: F401  (the decorator is built on these)
from minicache.stats import CacheInfo  # noqa: F401


def memoize(maxsize: int = 128, typed: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Cache a function's results by its arguments, keeping at most `maxsize` of them.

    The wrapper keeps the wrapped function's name and docstring and offers `cache_info()`
    (a `CacheInfo`) and `cache_clear()`.
    """
    if maxsize < 1:
        # Checked before anything else so a typo fails at decoration time, not at the first call.
        raise ValueError(f"maxsize must be at least 1, got {maxsize}")
    raise NotImplementedError("memoize is not written yet")
