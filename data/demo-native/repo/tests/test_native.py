"""The C functions themselves, called through ctypes without the Python package in between."""

import ctypes
import math
from pathlib import Path

import pytest

LIB = ctypes.CDLL(str(Path(__file__).resolve().parent.parent / "build" / "libvecstats.so"))
OK, EMPTY, DOMAIN, NULL = 0, 1, 2, 3


def c_call(name, values, *extra):
    """Call `name(xs, n, *extra, &out)`; return (status, out). AttributeError if the symbol is missing."""
    fn = getattr(LIB, name)
    fn.restype = ctypes.c_int
    array = (ctypes.c_double * len(values))(*values)
    out = ctypes.c_double(-12345.0)
    status = fn(array, ctypes.c_size_t(len(values)), *extra, ctypes.byref(out))
    return status, out.value


def test_version_string():
    LIB.vs_version.restype = ctypes.c_char_p
    assert LIB.vs_version() == b"0.1.0"


def test_c_sum():
    assert c_call("vs_sum", [1.5, 2.5, -1.0]) == (OK, 3.0)


def test_c_sum_of_nothing_is_zero():
    assert c_call("vs_sum", []) == (OK, 0.0)


def test_c_sum_keeps_small_terms():
    assert c_call("vs_sum", [1e16, 1.0, -1e16, 1.0]) == (OK, 2.0)


def test_c_mean():
    assert c_call("vs_mean", [2.0, 4.0, 9.0]) == (OK, 5.0)


def test_c_mean_of_nothing_is_empty_and_leaves_out_alone():
    assert c_call("vs_mean", []) == (EMPTY, -12345.0)


def test_c_min_max_range():
    values = [3.0, -7.5, 12.0, 0.0]
    assert c_call("vs_min", values) == (OK, -7.5)
    assert c_call("vs_max", values) == (OK, 12.0)
    assert c_call("vs_range", values) == (OK, 19.5)


def test_c_null_array_is_rejected():
    LIB.vs_mean.restype = ctypes.c_int
    out = ctypes.c_double(0.0)
    assert LIB.vs_mean(None, ctypes.c_size_t(3), ctypes.byref(out)) == NULL


@pytest.mark.parametrize("ddof, expected", [(0, 4.0), (1, 32.0 / 7.0)], ids=["population", "sample"])
def test_c_variance(ddof, expected):
    status, value = c_call("vs_variance", [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], ctypes.c_int(ddof))
    assert status == OK and value == pytest.approx(expected, rel=1e-12)


def test_c_variance_keeps_precision_far_from_zero():
    values = [1e9 + 4.0, 1e9 + 7.0, 1e9 + 13.0, 1e9 + 16.0]
    assert c_call("vs_variance", values, ctypes.c_int(1)) == (OK, 30.0)


def test_c_variance_needs_more_values_than_ddof():
    assert c_call("vs_variance", [5.0], ctypes.c_int(1))[0] == EMPTY
    assert c_call("vs_variance", [], ctypes.c_int(0))[0] == EMPTY
    assert c_call("vs_variance", [5.0], ctypes.c_int(0)) == (OK, 0.0)


def test_c_variance_rejects_other_ddof():
    assert c_call("vs_variance", [1.0, 2.0, 3.0], ctypes.c_int(2))[0] == DOMAIN


@pytest.mark.parametrize("values, expected", [([5.0, 1.0, 3.0], 3.0), ([4.0, 1.0, 3.0, 2.0], 2.5)],
                         ids=["odd", "even"])
def test_c_median(values, expected):
    assert c_call("vs_median", values) == (OK, expected)


def test_c_median_leaves_the_array_alone():
    fn = LIB.vs_median
    fn.restype = ctypes.c_int
    array = (ctypes.c_double * 4)(9.0, 1.0, 8.0, 2.0)
    out = ctypes.c_double()
    assert fn(array, ctypes.c_size_t(4), ctypes.byref(out)) == OK
    assert list(array) == [9.0, 1.0, 8.0, 2.0]


def test_c_median_empty_and_nan():
    assert c_call("vs_median", [])[0] == EMPTY
    assert c_call("vs_median", [1.0, math.nan, 2.0])[0] == DOMAIN


@pytest.mark.parametrize("q, expected", [(0.0, 10.0), (0.25, 17.5), (0.5, 25.0), (0.9, 37.0), (1.0, 40.0)],
                         ids=["q0", "q25", "q50", "q90", "q100"])
def test_c_quantile(q, expected):
    status, value = c_call("vs_quantile", [40.0, 10.0, 30.0, 20.0], ctypes.c_double(q))
    assert status == OK and value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("q", [-0.1, 1.5, math.nan], ids=["below", "above", "nan"])
def test_c_quantile_rejects_q_outside_the_unit_interval(q):
    assert c_call("vs_quantile", [1.0, 2.0], ctypes.c_double(q)) == (DOMAIN, -12345.0)
