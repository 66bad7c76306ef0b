"""The headline of a run: which model leads on FSR, per protocol and over all protocols, with what uncertainty.

Each model's FSR in a scope is the macro mean over tasks with the report's 95% bootstrap interval (10,000 resamples,
seed 42, resampling tasks). Models are listed by that mean; the rank says how many models are clearly ahead:

    rank = 1 + the number of models clearly ahead, and never better than the rank of a model listed above

where "clearly ahead" is the comparison page's rule ('b better' in `paired.reading`): over the tasks both models
ran, at least 6 tasks, the 95% paired bootstrap interval of the difference excludes 0 and the sign and signed-rank
tests both give p <= 0.05. Models that share a rank are tied within the uncertainty (shown "=1"). Paired, because
every model runs the same tasks: how hard a task is cancels in the difference, which two separate intervals ignore.

Drawn from report.json's predictions alone, so a report written before this module existed gets a headline too.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from asyncodebench.reports.paired import BETTER, MIN_TASKS_FOR_LABEL, paired, reading
from asyncodebench.scoring.bootstrap import macro_mean

OVERALL = "overall"
RANKED, ONE_MODEL, ONE_TASK, TOO_FEW = "ranked", "one model", "one task", "too few tasks"


@dataclass(frozen=True)
class Standing:
    """One model in one scope: its FSR over tasks with the interval, and its rank there."""

    model: str
    mean: float
    ci_low: float | None  # None with one task: resampling one task gives it back, which is no interval
    ci_high: float | None
    tasks: int
    rank: int | None  # None when the scope is not ranked (one model, one task)
    tied: bool  # another model has the same rank

    @property
    def rank_text(self) -> str:
        """`1`, `=1` for a tie, or "" when the scope is not ranked."""
        if self.rank is None:
            return ""
        return f"={self.rank}" if self.tied else str(self.rank)


@dataclass(frozen=True)
class Ranking:
    """The standings of one scope (a protocol id, or OVERALL), best first, and whether they could be ranked."""

    scope: str
    state: str  # RANKED, ONE_MODEL, ONE_TASK or TOO_FEW (ranked, but every model is tied by construction)
    standings: tuple[Standing, ...]

    def of(self, model: str) -> Standing | None:
        """The model's standing here; None when it ran no task in this scope."""
        return next((s for s in self.standings if s.model == model), None)


def task_values(predictions: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Scope -> model -> task -> final success in [0, 1]: per protocol the mean over the task's predictions
    (repeated runs); OVERALL the mean of those over the protocols the model ran on the task, so that each protocol
    weighs the same within a task and each task the same within a model."""
    runs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for p in predictions:
        if p.get("status") == "evaluated" and p.get("final_success") is not None:
            runs[(p["protocol"], p["model_name_or_path"], p["task_id"])].append(float(p["final_success"]))
    scopes: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    per_protocol: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (protocol, model, task), values in runs.items():
        scopes[protocol][model][task] = fmean(values)
        per_protocol[(model, task)].append(fmean(values))
    for (model, task), values in per_protocol.items():
        scopes[OVERALL][model][task] = fmean(values)
    return scopes


def clearly_ahead(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether the model with per-task values `a` is clearly ahead of `b`, paired over the tasks both ran."""
    shared = sorted(set(a) & set(b))
    return reading(paired([a[t] - b[t] for t in shared]), higher_is_better=True) == BETTER


def rank(scope: str, models: dict[str, dict[str, float]]) -> Ranking:
    """The standings of one scope from each model's per-task values (see the module's docstring for the rule)."""
    estimates = {model: macro_mean(list(values.values())) for model, values in models.items() if values}
    order = sorted(estimates, key=lambda m: (-estimates[m].mean, m))
    tasks = len({task for values in models.values() for task in values})
    state = ONE_MODEL if len(order) == 1 else ONE_TASK if tasks == 1 else (
        TOO_FEW if tasks < MIN_TASKS_FOR_LABEL else RANKED)
    ranks: list[int | None] = []
    for i, model in enumerate(order):
        if state in (ONE_MODEL, ONE_TASK):
            ranks.append(None)
            continue
        ahead = sum(clearly_ahead(models[other], models[model]) for other in order if other != model)
        previous = ranks[i - 1] if i else 1
        ranks.append(max(1 + ahead, previous or 1))
    standings = []
    for model, place in zip(order, ranks):
        estimate = estimates[model]
        interval = estimate.n > 1
        standings.append(Standing(model, estimate.mean, estimate.ci_low if interval else None,
                                  estimate.ci_high if interval else None, estimate.n, place,
                                  place is not None and ranks.count(place) > 1))
    return Ranking(scope, state, tuple(standings))


def headline(predictions: list[dict[str, Any]], protocols: tuple[str, ...] = ()) -> list[Ranking]:
    """OVERALL first, then each protocol of the report (in `protocols`' order, the rest by id)."""
    scopes = task_values(predictions)
    named = [p for p in protocols if p in scopes] + sorted(p for p in scopes if p not in protocols and p != OVERALL)
    return [rank(scope, scopes[scope]) for scope in ([OVERALL] if OVERALL in scopes else []) + named]
