import pytest

from minicache.api import memoize
from minicache.stats import CacheInfo


def counting(maxsize=8, typed=False):
    """A memoized function together with the list of calls that reached its body."""
    calls = []

    @memoize(maxsize=maxsize, typed=typed)
    def square(x, *, scale=1):
        """Square x, then scale it."""
        calls.append((x, scale))
        return x * x * scale

    return square, calls


def test_rejects_maxsize_below_one():
    with pytest.raises(ValueError):
        memoize(maxsize=0)


def test_memoize_reuses_result():
    square, calls = counting()
    assert square(3) == 9 and square(3) == 9
    assert calls == [(3, 1)]


def test_memoize_keyword_arguments_are_part_of_the_key():
    square, calls = counting()
    assert square(2, scale=10) == 40 and square(2) == 4 and square(2, scale=10) == 40
    assert calls == [(2, 10), (2, 1)]


@pytest.mark.parametrize("left, right", [(1, 1.0), (True, 1)], ids=["int-float", "bool-int"])
def test_memoize_typed_separates(left, right):
    loose, loose_calls = counting()
    loose(left)
    loose(right)
    assert len(loose_calls) == 1
    strict, strict_calls = counting(typed=True)
    strict(left)
    strict(right)
    assert len(strict_calls) == 2


def test_cache_info_counts_hits_and_misses():
    square, _ = counting(maxsize=4)
    square(1)
    square(1)
    square(2)
    assert square.cache_info() == CacheInfo(hits=1, misses=2, maxsize=4, currsize=2)


def test_evicts_least_recent_call():
    square, calls = counting(maxsize=2)
    for x in (1, 2, 1, 3, 1, 2):
        square(x)
    assert calls == [(1, 1), (2, 1), (3, 1), (2, 1)]
    assert square.cache_info().currsize == 2


def test_cache_clear_resets_entries_and_counters():
    square, calls = counting()
    square(5)
    square.cache_clear()
    assert square.cache_info() == CacheInfo(hits=0, misses=0, maxsize=8, currsize=0)
    square(5)
    assert calls == [(5, 1), (5, 1)]


def test_wrapper_keeps_name_and_docstring():
    square, _ = counting()
    assert square.__name__ == "square"
    assert square.__doc__ == "Square x, then scale it."
