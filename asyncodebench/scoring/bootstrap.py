"""Macro means over tasks with 95% percentile bootstrap intervals (METRICS decision 7): every task weighs the same,
and the resamples are seeded."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 42
"""Decision 7: fixed so that every report of the same scores prints the same interval."""


@dataclass(frozen=True)
class MeanEstimate:
    """A macro mean over tasks with its 95% percentile bootstrap interval; NaN everywhere when unscored."""

    mean: float  # NaN when there was no input
    ci_low: float  # 2.5th percentile of the bootstrap means
    ci_high: float  # 97.5th percentile of the bootstrap means
    n: int  # number of tasks averaged
    resampler: str  # "numpy" or "random": the generator that drew the resamples (they differ)

    @property
    def scored(self) -> bool:
        """False when there was nothing to average, so tables print "unscored" rather than 0."""
        return self.n > 0


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default method) of an ascending sequence."""
    position = (len(sorted_values) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _bootstrap_means(values: Sequence[float]) -> tuple[list[float], str]:
    """Means of BOOTSTRAP_RESAMPLES resamples with replacement, seeded, and the generator's name."""
    try:  # imported here so these pure functions still run where numpy is absent
        import numpy as np  # noqa: PLC0415
    except ImportError:
        rng = random.Random(BOOTSTRAP_SEED)
        n = len(values)
        means = [fmean(values[rng.randrange(n)] for _ in range(n)) for _ in range(BOOTSTRAP_RESAMPLES)]
        return sorted(means), "random"
    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(BOOTSTRAP_SEED).integers(0, len(data), size=(BOOTSTRAP_RESAMPLES, len(data)))
    return sorted(data[picks].mean(axis=1).tolist()), "numpy"


def macro_mean(values: Sequence[float]) -> MeanEstimate:
    """Average per-task values with equal task weight and a 95% percentile bootstrap interval over tasks.

    Callers pass one value per task of a (model, protocol) group; a task's value must not be dropped because it is
    bad (decision 1). Empty input is "unscored" (NaN), never 0.

    Raises:
        ValueError: a value is None or NaN; decide how that task scores before averaging.
    """
    if any(value is None or math.isnan(value) for value in values):
        raise ValueError("macro_mean got None or NaN; score every task (0 for a failed run) before averaging")
    if not values:
        return MeanEstimate(math.nan, math.nan, math.nan, 0, "none")
    means, resampler = _bootstrap_means([float(value) for value in values])
    return MeanEstimate(fmean(values), _percentile(means, 2.5), _percentile(means, 97.5), len(values), resampler)
