import pytest

from minicache.core import LRUCache, make_key


def test_rejects_maxsize_below_one():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_new_cache_is_empty():
    cache = LRUCache(2)
    assert len(cache) == 0 and "a" not in cache


def test_get_missing_returns_default():
    assert LRUCache(2).get("nope", "fallback") == "fallback"


def test_put_then_get():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1 and len(cache) == 1


def test_evicts_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert cache.keys() == ["b", "c"]
    assert cache.evictions == 1


def test_get_refreshes_recency():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert "a" in cache and "b" not in cache


def test_clear_empties_but_keeps_eviction_count():
    cache = LRUCache(1)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.clear()
    assert len(cache) == 0 and cache.evictions == 1


def test_make_key_equal_for_equal_calls():
    assert make_key((1, "x"), {"k": 2}) == make_key((1, "x"), {"k": 2})
    assert hash(make_key((1, "x"), {"k": 2})) == hash(make_key((1, "x"), {"k": 2}))


def test_make_key_ignores_keyword_order():
    assert make_key((), {"a": 1, "b": 2}) == make_key((), {"b": 2, "a": 1})


def test_make_key_separates_positional_from_keyword():
    assert make_key((("a", 1),), {}) != make_key((), {"a": 1})


@pytest.mark.parametrize("left, right", [(1, 1.0), (True, 1)], ids=["int-float", "bool-int"])
def test_make_key_typed(left, right):
    assert make_key((left,), {}) == make_key((right,), {})
    assert make_key((left,), {}, typed=True) != make_key((right,), {}, typed=True)
