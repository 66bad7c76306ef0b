"""The Python API, which reaches the C library through vecstats._native."""

import math
from pathlib import Path

import pytest

import vecstats
from vecstats import maximum, mean, median, minimum, quantile, spread, stdev, total, variance


def test_total_and_mean():
    assert total([1, 2, 3.5]) == 6.5
    assert mean([1, 2, 3, 4]) == 2.5


def test_accepts_any_iterable_of_numbers():
    assert mean(x for x in range(1, 6)) == 3.0
    assert total((True, 2, 3.0)) == 6.0


def test_total_of_nothing_is_zero():
    assert total([]) == 0.0


def test_mean_of_nothing_raises_value_error():
    with pytest.raises(ValueError, match="vs_mean"):
        mean([])


def test_minimum_maximum_spread():
    values = [4.0, -1.0, 9.5]
    assert (minimum(values), maximum(values), spread(values)) == (-1.0, 9.5, 10.5)


def test_library_is_found_from_the_package_location():
    from vecstats import _native

    assert _native.LIBRARY.parent.name == "build"
    assert _native.LIBRARY.parent.parent == Path(vecstats.__file__).resolve().parent.parent


@pytest.mark.parametrize("ddof, expected", [(0, 4.0), (1, 32.0 / 7.0)], ids=["population", "sample"])
def test_variance(ddof, expected):
    assert variance([2, 4, 4, 4, 5, 5, 7, 9], ddof=ddof) == pytest.approx(expected, rel=1e-12)


def test_variance_far_from_zero():
    assert variance([1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16], ddof=1) == 30.0


def test_variance_errors_are_value_errors():
    with pytest.raises(ValueError):
        variance([5.0], ddof=1)
    with pytest.raises(ValueError):
        variance([1.0, 2.0], ddof=2)


def test_stdev():
    assert stdev([2, 4, 4, 4, 5, 5, 7, 9]) == 2.0


@pytest.mark.parametrize("values, expected", [([5, 1, 3], 3.0), ([4, 1, 3, 2], 2.5)], ids=["odd", "even"])
def test_median(values, expected):
    assert median(values) == expected


def test_median_does_not_reorder_the_callers_list():
    values = [9.0, 1.0, 8.0, 2.0]
    assert median(values) == 5.0 and values == [9.0, 1.0, 8.0, 2.0]


def test_median_errors_are_value_errors():
    with pytest.raises(ValueError):
        median([])
    with pytest.raises(ValueError):
        median([1.0, math.nan])


@pytest.mark.parametrize("q, expected", [(0.0, 10.0), (0.25, 17.5), (0.9, 37.0), (1.0, 40.0)],
                         ids=["q0", "q25", "q90", "q100"])
def test_quantile(q, expected):
    assert quantile([40, 10, 30, 20], q) == pytest.approx(expected, rel=1e-12)


def test_quantile_half_is_the_median():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0]
    assert quantile(values, 0.5) == median(values)


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan], ids=["below", "above", "nan"])
def test_quantile_rejects_q_outside_the_unit_interval(q):
    with pytest.raises(ValueError):
        quantile([1.0, 2.0], q)
