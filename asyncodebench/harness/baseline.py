"""The base state of each task, measured once per run and image (METRICS decisions 9 and 12).

The evaluator runs on the base state (overlays applied, no patch) exactly as on a prediction. Its skipped + xfailed
count, the node ids it skipped or xfailed, and its total are the floor every prediction of the task is held to, and
its counts are compared with the task's recorded initial counts: a difference is an image problem, reported with
the run, not a model failure. The run keeps the record in its folder (`run/baselines.py`), so resuming and
rescoring use the same floor.
"""

from __future__ import annotations

from typing import Any

from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.spec import COUNT_KEYS, TaskSpec
from asyncodebench.scoring.grading import Baseline, normalize_report
from asyncodebench.scoring.tampering import examine


def measure(bench: Workbench) -> dict[str, Any]:
    """Run the evaluator on the base state; return the record kept with the run.

    `skipped_or_xfailed_ids` lists, sorted, every node id the base run skipped or xfailed (tests, and collectors
    skipped whole), or is null when the run gave no usable report or no `tests` list. Decision 12 reads any id
    outside this list as "not skipped at base", including ids the base run never had: the task's test targets are
    restored from the base, so a new id only appears when code under test renames or adds tests, and skipping
    such a test is what the rule is there to catch (see `grading.newly_skipped`).

    Raises:
        SandboxUnavailableError: the container engine failed.
    """
    spec = bench.spec
    _, run = bench.evaluate(b"")
    # The base is read as predictions are: sentinels out, pytest's exit code as it would be without them.
    check = examine(run.report, run.exit_code, run.tail, run.sentinel) if run else None
    report, exit_code = (check.report, check.exit_code) if check else (None, None)
    normalized = normalize_report(report, exit_code, run.tail if run else "")
    counts = None if normalized.synthetic_summary else {
        "collected": normalized.total, "passed": normalized.passed, "failed": normalized.failed,
        "errors": normalized.errors, "skipped": normalized.skipped, "xfailed": normalized.xfailed,
    }
    ids = normalized.skipped_or_xfailed_ids
    return {
        "task_id": spec.task_id, "pinned_ref": spec.pinned_ref,
        "exit_code": exit_code, "report_problem": run.report_problem if run else "missing",
        "counts": counts, "recorded_initial_counts": list(spec.initial_counts),
        "matches_recorded": _matches(counts, spec.initial_counts),
        "skipped_or_xfailed_ids": None if counts is None or ids is None else sorted(ids),
    }


def _matches(counts: dict[str, int] | None, recorded: tuple[dict[str, int], ...]) -> bool | None:
    """Whether the measured counts equal one recorded snapshot; None when nothing was recorded."""
    if not recorded:
        return None
    return counts is not None and any(all(counts[k] == snapshot[k] for k in COUNT_KEYS) for snapshot in recorded)


def from_record(record: dict[str, Any], spec: TaskSpec) -> Baseline | None:
    """The floor a base-state record sets; records made before decision 12 (no id list) give the count rule only."""
    counts = record.get("counts")
    if counts:
        return Baseline(counts["skipped"] + counts.get("xfailed", 0), counts["collected"], "base_run",
                        _recorded_ids(record.get("skipped_or_xfailed_ids")))
    if spec.initial_counts:  # the base run gave no report: hold predictions to what the release recorded
        snapshot = spec.initial_counts[0]
        return Baseline(snapshot["skipped"], snapshot["collected"], "recorded_initial_counts")
    return None


def _recorded_ids(value: Any) -> frozenset[str] | None:
    """The base's skipped-or-xfailed node ids as recorded; None when absent or not a list of strings (then the
    identity rule is not applied rather than applied against a wrong set)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return frozenset(value)


def problem(record: dict[str, Any]) -> str | None:
    """What is wrong with the image as its base run shows it, for the report; None when it agrees."""
    if record.get("counts") is None:
        return f"the base state's evaluator gave no usable report ({record.get('report_problem')})"
    if record.get("matches_recorded") is False:
        return (f"the base state's counts {record['counts']} differ from the recorded initial counts "
                f"{record['recorded_initial_counts']}")
    return None
