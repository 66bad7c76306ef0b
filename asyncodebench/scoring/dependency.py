"""Dependency metrics of one run (ADPR, DRS, DRE, CAIL, T), computed from its checkpoint records.

Pure functions over plain records, so they are tested without Docker and re-run from saved checkpoint files. The
rules are METRICS.md sections 4 to 6 with the project decisions: ADPR over all dependency points (3), the official
"resolved" rule with the T+1 penalty (4) and the three-case CAIL penalty (5). The SAD proxy (decision 6) is `sad`;
macro means over tasks with percentile bootstrap intervals (decision 7) are `bootstrap`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

FINAL_INTEGRATED = "final_integrated"
"""checkpoint_type and checkpoint_id of the checkpoint taken after the final evaluator run."""

INTEGRATED_WORKSPACE = "integrated_workspace"
"""workspace_kind of checkpoints taken on the integrated repository (the only ones that count for DRS)."""


@dataclass(frozen=True)
class DependencyPoint:
    """The fields of a `dependencies` dataset row that the metrics and the probes need."""

    dependency_id: str  # unique id, `<task>.<producer>_to_<consumer>.<contract>`
    producer_agent: str  # agent owning the producer side; "integrator" or "" for integration contracts
    consumer_agent: str  # agent relying on the contract
    producer_files: tuple[str, ...]  # files the producer owns
    consumer_files: tuple[str, ...]  # files the consumer owns (empty when the row has null)
    upstream_probe_tests: tuple[str, ...]  # selectors checking the producer side
    downstream_probe_tests: tuple[str, ...]  # selectors checking the consumer side; may be empty
    integrated_probe_tests: tuple[str, ...]  # selectors checking the contract end to end
    contract_summary: str  # prose description of the contract, mined for SAD-proxy tokens
    metrics_enabled: tuple[str, ...]  # metric names this point feeds, e.g. ("ADPR", "DRS", "CAIL", "SAD")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> DependencyPoint:
        """Build a point from a dataset row; list fields given as null become empty tuples."""
        def strings(key: str) -> tuple[str, ...]:
            return tuple(row.get(key) or ())

        return cls(
            dependency_id=str(row["dependency_id"]),
            producer_agent=str(row.get("producer_agent") or ""),
            consumer_agent=str(row.get("consumer_agent") or ""),
            producer_files=strings("producer_files"),
            consumer_files=strings("consumer_files"),
            upstream_probe_tests=strings("upstream_probe_tests"),
            downstream_probe_tests=strings("downstream_probe_tests"),
            integrated_probe_tests=strings("integrated_probe_tests"),
            contract_summary=str(row.get("contract_summary") or ""),
            metrics_enabled=strings("metrics_enabled"),
        )

    def groups(self) -> dict[str, tuple[str, ...]]:
        """The three probe groups by their checkpoint-record names."""
        return {
            "upstream": self.upstream_probe_tests,
            "downstream": self.downstream_probe_tests,
            "integrated": self.integrated_probe_tests,
        }


@dataclass(frozen=True)
class DependencyOutcome:
    """Which probe groups of one dependency passed at one checkpoint."""

    dependency_id: str  # the dependency point's id
    upstream: bool  # producer-side group passed
    downstream: bool  # consumer-side group passed
    integrated: bool  # end-to-end group passed


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint of a run, reduced to what the metrics read; built from live probes or a recorded file."""

    logical_step: int  # 1-based position in write order
    checkpoint_type: str  # agent_artifact, integration_after_merge, final_integrated, or a manager type
    checkpoint_id: str  # unique id; "final_integrated" for the last one
    workspace_kind: str  # "agent_workspace" or "integrated_workspace"
    recorded_at: str  # ISO 8601 time, the tie-breaker when two records share a step
    outcomes: tuple[DependencyOutcome, ...]  # one per dependency probed at this checkpoint

    def __post_init__(self) -> None:
        """Refuse a step that cannot order the run's checkpoints."""
        if isinstance(self.logical_step, bool) or not isinstance(self.logical_step, int) or self.logical_step < 1:
            raise ValueError(f"checkpoint {self.checkpoint_id!r}: logical_step must be an int >= 1, "
                             f"got {self.logical_step!r}")

    @property
    def is_final(self) -> bool:
        """True for the checkpoint written after the final evaluator run."""
        return FINAL_INTEGRATED in (self.checkpoint_type, self.checkpoint_id)

    def outcome(self, dependency_id: str) -> DependencyOutcome | None:
        """The checkpoint's outcome for a dependency, or None when it was not probed (counts as not passed)."""
        return next((item for item in self.outcomes if item.dependency_id == dependency_id), None)


@dataclass(frozen=True)
class DependencyMetrics:
    """Per-dependency scores of one run."""

    dependency_id: str  # the dependency point's id
    final_integrated_pass: bool  # integrated group passes at the final checkpoint
    drs: int | None  # raw strict DRS: first integrated-workspace step where the integrated group passes
    up: int | None  # first step (any workspace) where the upstream group passes
    down: int | None  # first step (any workspace) where the downstream group passes
    resolved: bool  # final_integrated_pass and drs is not None (decision 4)
    drs_penalized: int | None  # drs if resolved else T+1; None when T == 0
    dre: float | None  # 1 - (drs_penalized - 1) / T if resolved else 0; None when T == 0
    cail_raw: int | None  # down - up when both were observed, else None ("unresolved", never 0)
    cail_penalized: int | None  # three-case penalty of section 6; None when T == 0


@dataclass(frozen=True)
class RunMetrics:
    """Dependency scores of one run (one task x one protocol)."""

    checkpoint_count: int  # T: every checkpoint record, agent-workspace ones included
    dependency_count: int  # ADPR denominator: all dependency points of the task
    final_pass_count: int  # ADPR numerator
    adpr: float | None  # final_pass_count / dependency_count; None without dependency points
    unresolved_count: int  # dependencies without a final integrated pass
    drs_penalized_mean: float | None  # None when T == 0 or no dependency points
    dre_mean: float | None  # None when T == 0 or no dependency points
    cail_penalized_mean: float | None  # None when T == 0 or no dependency points
    has_final_checkpoint: bool  # False means ADPR was read from the last checkpoint and the run is invalid
    dependencies: tuple[DependencyMetrics, ...]  # per-dependency detail, in dependency-row order


def sort_checkpoints(checkpoints: Sequence[CheckpointRecord]) -> list[CheckpointRecord]:
    """Order checkpoints by logical step, then recording time (METRICS section 4)."""
    return sorted(checkpoints, key=lambda record: (record.logical_step, record.recorded_at))


def _first_step(checkpoints: Sequence[CheckpointRecord], dependency_id: str, group: str,
                integrated_only: bool = False) -> int | None:
    """Logical step of the first checkpoint where the dependency's group passes, or None if it never does."""
    for record in checkpoints:
        if integrated_only and record.workspace_kind != INTEGRATED_WORKSPACE:
            continue
        outcome = record.outcome(dependency_id)
        if outcome is not None and getattr(outcome, group):
            return record.logical_step
    return None


def penalized_cail(up: int | None, down: int | None, t: int) -> int:
    """Three-case CAIL penalty (decision 5): observed lag floored at 0, else the steps left after `up`, else T+1."""
    if up is None:
        return t + 1
    if down is None:
        return t + 1 - up
    return max(0, down - up)


def _dependency_metrics(ordered: Sequence[CheckpointRecord], final: CheckpointRecord | None, dependency_id: str,
                        t: int) -> DependencyMetrics:
    """Score one dependency over a run's ordered checkpoints."""
    final_outcome = final.outcome(dependency_id) if final else None
    final_pass = bool(final_outcome and final_outcome.integrated)
    drs = _first_step(ordered, dependency_id, "integrated", integrated_only=True)
    up = _first_step(ordered, dependency_id, "upstream")
    down = _first_step(ordered, dependency_id, "downstream")
    resolved = final_pass and drs is not None
    drs_pen = (drs if resolved else t + 1) if t > 0 else None
    return DependencyMetrics(
        dependency_id=dependency_id,
        final_integrated_pass=final_pass,
        drs=drs, up=up, down=down, resolved=resolved,
        drs_penalized=drs_pen,
        dre=(1 - (drs_pen - 1) / t if resolved else 0.0) if drs_pen is not None else None,
        cail_raw=down - up if up is not None and down is not None else None,
        cail_penalized=penalized_cail(up, down, t) if t > 0 else None,
    )


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    """Mean of a per-dependency column; None when it is empty or was not computable (T == 0)."""
    present = [value for value in values if value is not None]
    return fmean(present) if present and len(present) == len(values) else None


def run_metrics(checkpoints: Sequence[CheckpointRecord], dependencies: Sequence[DependencyPoint]) -> RunMetrics:
    """Compute ADPR, DRS, DRE, CAIL and T for one run from its checkpoints.

    Only the final state counts for ADPR; a dependency passing earlier and regressing is unresolved and takes the
    T+1 penalty, as does one that never passes. A run without a final_integrated checkpoint is scored from its last
    checkpoint, as upstream does, and flagged through `has_final_checkpoint` so it can be kept out of tables.
    """
    ordered = sort_checkpoints(checkpoints)
    finals = [record for record in ordered if record.is_final]
    final = finals[-1] if finals else (ordered[-1] if ordered else None)
    t = len(ordered)
    rows = tuple(_dependency_metrics(ordered, final, dep.dependency_id, t) for dep in dependencies)
    final_passes = sum(1 for row in rows if row.final_integrated_pass)
    return RunMetrics(
        checkpoint_count=t,
        dependency_count=len(rows),
        final_pass_count=final_passes,
        adpr=final_passes / len(rows) if rows else None,
        unresolved_count=len(rows) - final_passes,
        drs_penalized_mean=_mean_or_none([row.drs_penalized for row in rows]),
        dre_mean=_mean_or_none([row.dre for row in rows]),
        cail_penalized_mean=_mean_or_none([row.cail_penalized for row in rows]),
        has_final_checkpoint=bool(finals),
        dependencies=rows,
    )
