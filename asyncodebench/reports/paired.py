"""Paired statistics over tasks: the mean difference with a paired bootstrap interval, the sign test and the
Wilcoxon signed-rank test.

Pure functions over lists of per-task differences (b - a, one per task both sides scored). The interval reuses the
report's bootstrap (`scoring.bootstrap.macro_mean`: 10,000 resamples, seed 42, percentile interval), applied to the
differences: resampling tasks with replacement and keeping each task's pair together is the same as resampling the
differences. Both tests are exact and two-sided; a zero difference carries no sign, so both drop it (Wilcoxon's
original rule) and the caller states how many there were.

`reading` turns a result into the label a table shows. "b better" or "b worse" needs enough tasks, both tests at the
stated level and the interval on one side of 0, all pointing the same way; anything less is said in words instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from asyncodebench.scoring.bootstrap import macro_mean

ALPHA = 0.05
"""The level a label is stated at: both two-sided p-values at most this."""

EXACT_WILCOXON_LIMIT = 50
"""Above this many non-zero differences the signed-rank distribution is approximated by a normal one (the exact
count grows as n^3; the release has 19 tasks)."""


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison of two cells on one metric."""

    tasks: int  # tasks paired (both sides scored)
    mean_difference: float | None  # mean of b - a; None when no task is paired
    ci_low: float | None  # 2.5th percentile of the bootstrap means; None under two tasks (one value has no spread)
    ci_high: float | None  # 97.5th percentile
    positive: int  # tasks where b > a
    negative: int  # tasks where b < a
    zero: int  # ties, left out of both tests
    sign_p: float | None  # exact two-sided sign test; None when every difference is zero
    wilcoxon_statistic: float | None  # W+: the sum of the ranks of the positive differences
    wilcoxon_p: float | None  # exact two-sided signed-rank test (ties get average ranks); None when all zero


def paired(differences: Sequence[float]) -> PairedResult:
    """Every statistic of one comparison from its per-task differences."""
    # Rounded so that differences equal on paper are equal here too (0.9 - 0.5 and 0.7 - 0.3 differ in the last
    # bit), which the signs and the tied ranks depend on.
    values = [round(float(d), 12) for d in differences]
    if not values:
        return PairedResult(0, None, None, None, 0, 0, 0, None, None, None)
    estimate = macro_mean(values)
    positive = sum(d > 0 for d in values)
    negative = sum(d < 0 for d in values)
    statistic, wilcoxon_p = signed_rank(values)
    # Resampling one task always draws that task: the "interval" [x, x] would look like certainty.
    low, high = (estimate.ci_low, estimate.ci_high) if len(values) > 1 else (None, None)
    return PairedResult(len(values), estimate.mean, low, high, positive, negative,
                        len(values) - positive - negative, sign_test(positive, negative), statistic, wilcoxon_p)


def min_tasks_for_label(alpha: float = ALPHA) -> int:
    """The fewest tasks with which a two-sided exact test can reach `alpha`.

    With n non-zero differences the smallest two-sided p of the sign test, and of the signed-rank test, is 2 / 2^n
    (every sign the same): 0.0625 with 5 tasks, 0.031 with 6. Below this count no data could support a label.
    """
    n = 1
    while 2 / 2**n > alpha:
        n += 1
    return n


MIN_TASKS_FOR_LABEL = min_tasks_for_label()

NO_TASKS = "no tasks paired"
ONE_TASK = "one task: no inference"
TOO_FEW = "too few tasks: no inference"
UNCLEAR = "no clear difference"
BETTER = "b better"
WORSE = "b worse"
READINGS = (NO_TASKS, ONE_TASK, TOO_FEW, UNCLEAR, BETTER, WORSE)


def reading(result: PairedResult, higher_is_better: bool) -> str:
    """The label of one comparison: better or worse only when at least MIN_TASKS_FOR_LABEL tasks are paired, the
    95% interval excludes 0, both tests give p <= ALPHA, and all three point the same way."""
    if result.tasks == 0:
        return NO_TASKS
    if result.tasks == 1:
        return ONE_TASK
    if result.tasks < MIN_TASKS_FOR_LABEL:
        return TOO_FEW
    if (result.ci_low is None or result.ci_high is None or result.sign_p is None or result.wilcoxon_p is None
            or result.wilcoxon_statistic is None or result.sign_p > ALPHA or result.wilcoxon_p > ALPHA):
        return UNCLEAR
    if result.ci_low <= 0 <= result.ci_high:
        return UNCLEAR
    up = result.ci_low > 0
    # Which way each test leans: more positive signs; W+ above half the rank total m(m+1)/2 of m non-zero ones.
    nonzero = result.positive + result.negative
    if (result.positive > result.negative) != up or (result.wilcoxon_statistic > nonzero * (nonzero + 1) / 4) != up:
        return UNCLEAR
    return BETTER if up == higher_is_better else WORSE


def sign_test(positive: int, negative: int) -> float | None:
    """Two-sided exact binomial test of `positive` successes in `positive + negative` fair coin flips."""
    trials = positive + negative
    if trials == 0:
        return None
    tail = sum(math.comb(trials, k) for k in range(min(positive, negative) + 1)) / 2**trials
    return min(1.0, 2 * tail)


def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of the values, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start:end + 1]:
            ranks[i] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def signed_rank(differences: Sequence[float]) -> tuple[float | None, float | None]:
    """(W+, two-sided p) of the Wilcoxon signed-rank test; zero differences dropped.

    The p-value is exact under the null that each difference's sign is a fair coin given its magnitude: the
    distribution of W+ is counted over all 2^n sign patterns of the (average) ranks. Doubled ranks are whole numbers
    even with ties, which makes the count a subset-sum table.
    """
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return None, None
    ranks = average_ranks([abs(d) for d in nonzero])
    statistic = sum(r for r, d in zip(ranks, nonzero) if d > 0)
    if len(nonzero) > EXACT_WILCOXON_LIMIT:
        return statistic, _normal_p(statistic, ranks)
    doubled = [round(2 * r) for r in ranks]
    counts = [0] * (sum(doubled) + 1)  # counts[s]: sign patterns whose doubled W+ is s
    counts[0] = 1
    reach = 0
    for step in doubled:
        for total in range(reach, -1, -1):
            if counts[total]:
                counts[total + step] += counts[total]
        reach += step
    observed = round(2 * statistic)
    patterns = 2 ** len(nonzero)
    lower = sum(counts[: observed + 1]) / patterns
    upper = sum(counts[observed:]) / patterns
    return statistic, min(1.0, 2 * min(lower, upper))


def _normal_p(statistic: float, ranks: Sequence[float]) -> float:
    """Two-sided p from the normal approximation of W+ (variance from the ranks themselves, so ties are allowed)."""
    mean = sum(ranks) / 2
    sd = math.sqrt(sum(r * r for r in ranks) / 4)
    z = abs(statistic - mean) / sd
    return math.erfc(z / math.sqrt(2))
