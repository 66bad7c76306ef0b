"""minicache: a bounded LRU cache and a memoizing decorator built on it."""

from minicache.api import memoize
from minicache.core import LRUCache, make_key
from minicache.stats import CacheInfo, format_info

__all__ = ["CacheInfo", "LRUCache", "format_info", "make_key", "memoize"]
__version__ = "0.1.0"
