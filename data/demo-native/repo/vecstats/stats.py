"""The Python face of the library: one function per statistic, taking any iterable of numbers.

Each one converts its input to a C array and calls the matching `vs_*` function of
build/libvecstats.so (see `vecstats._native`). Arguments are checked by the C side: an input too
small for the statistic, or an argument outside its domain, comes back as a status that raises
ValueError.
"""

from collections.abc import Iterable

from vecstats._native import call


def total(values: Iterable[float]) -> float:
    """The sum of the values (0.0 for none), without the drift of adding them one by one."""
    return call("vs_sum", values)


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean; ValueError for no values."""
    return call("vs_mean", values)


def minimum(values: Iterable[float]) -> float:
    """The smallest value; ValueError for no values."""
    return call("vs_min", values)


def maximum(values: Iterable[float]) -> float:
    """The largest value; ValueError for no values."""
    return call("vs_max", values)


def spread(values: Iterable[float]) -> float:
    """The largest value minus the smallest; ValueError for no values."""
    return call("vs_range", values)


def variance(values: Iterable[float], ddof: int = 0) -> float:
    """The variance: population (ddof=0) or sample (ddof=1); ValueError for n <= ddof or another ddof."""
    raise NotImplementedError("variance is not written yet")


def stdev(values: Iterable[float], ddof: int = 0) -> float:
    """The standard deviation, the square root of `variance(values, ddof)`."""
    raise NotImplementedError("stdev is not written yet")


def median(values: Iterable[float]) -> float:
    """The middle value, or the mean of the two middle ones for an even count; the input is not reordered.

    ValueError for no values or a NaN among them.
    """
    raise NotImplementedError("median is not written yet")


def quantile(values: Iterable[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1), interpolated linearly between neighbouring ranks.

    ValueError for no values, a NaN among them, or q outside [0, 1].
    """
    raise NotImplementedError("quantile is not written yet")
