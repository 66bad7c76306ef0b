"""vecstats: summary statistics of float sequences, computed by the C++ library build/libvecstats.so."""

from vecstats.stats import maximum, mean, median, minimum, quantile, spread, stdev, total, variance

__all__ = ["maximum", "mean", "median", "minimum", "quantile", "spread", "stdev", "total", "variance"]
__version__ = "0.1.0"
