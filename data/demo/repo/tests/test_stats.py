import dataclasses

import pytest

from minicache.stats import CacheInfo, format_info


def test_hit_rate_is_zero_before_any_call():
    assert CacheInfo(hits=0, misses=0, maxsize=4, currsize=0).hit_rate == 0.0


def test_hit_rate_is_share_of_hits():
    assert CacheInfo(hits=3, misses=1, maxsize=4, currsize=1).hit_rate == 0.75


def test_format_info_is_one_stable_line():
    line = format_info(CacheInfo(hits=1, misses=3, maxsize=8, currsize=3))
    assert line == "hits=1 misses=3 size=3/8 hit_rate=0.25"


def test_cache_info_is_frozen():
    info = CacheInfo(hits=0, misses=0, maxsize=1, currsize=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.hits = 10
