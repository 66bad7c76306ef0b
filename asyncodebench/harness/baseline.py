"""The base state of each task, measured once per run and image (METRICS decisions 9, 12 and 14).

The evaluator runs on the base state (overlays applied, no patch) exactly as on a prediction, and so do the probes.
Its skipped + xfailed count, the node ids it skipped or xfailed, and its total are the floor every prediction of the
task is held to; the node ids it collected, and those its probes collected for each selector, are the tests every
prediction is scored on (decision 14). Its counts are compared with the task's recorded initial counts: a
difference is an image problem, reported with the run, not a model failure. The run keeps the record in its folder
(`run/baselines.py`), so resuming and rescoring use the same floor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asyncodebench.harness.checks import examine_probes
from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.probes import ProbeRun, selector_results
from asyncodebench.harness.sandbox import SandboxUnavailableError
from asyncodebench.harness.spec import COUNT_KEYS, TaskSpec
from asyncodebench.scoring.grading import Baseline, normalize_report
from asyncodebench.scoring.tampering import examine


@dataclass(frozen=True)
class BaseStateRecord:
    """What the evaluator gave on a task's base state in one image: the record kept with the run."""

    task_id: str
    pinned_ref: str  # the image it was measured in: a record of another image is measured again
    exit_code: int | None
    report_problem: str | None  # why the report could not be read ("missing" when the run gave none)
    counts: Mapping[str, int] | None  # collected, passed, failed, errors, skipped, xfailed; None without a report
    recorded_initial_counts: tuple[Mapping[str, int], ...]  # the release's recorded counts for the task
    matches_recorded: bool | None  # counts equal one recorded snapshot; None when nothing was recorded
    skipped_or_xfailed_ids: tuple[str, ...] | None  # sorted; None without a usable list (or from before decision 12)
    # Sorted node ids of every test the base's evaluator collected; None without a usable list (or from before
    # decision 14: then predictions are scored on their own counts).
    collected_ids: tuple[str, ...] | None = None
    # Per selector, the sorted node ids the base's probes collected for it; only selectors for which they
    # collected something. None when the probes did not run (--no-probes) or the record predates decision 14.
    selector_ids: Mapping[str, tuple[str, ...]] | None = None
    failed_collectors: tuple[str, ...] = ()  # sorted node ids of the collectors whose collection failed at base

    def to_json(self) -> dict[str, Any]:
        """The record as saved (`from_json` reads it back)."""
        return {"task_id": self.task_id, "pinned_ref": self.pinned_ref, "exit_code": self.exit_code,
                "report_problem": self.report_problem, "counts": None if self.counts is None else dict(self.counts),
                "recorded_initial_counts": [dict(c) for c in self.recorded_initial_counts],
                "matches_recorded": self.matches_recorded,
                "skipped_or_xfailed_ids": None if self.skipped_or_xfailed_ids is None
                else list(self.skipped_or_xfailed_ids),
                "collected_ids": None if self.collected_ids is None else list(self.collected_ids),
                "selector_ids": None if self.selector_ids is None
                else {selector: list(ids) for selector, ids in sorted(self.selector_ids.items())},
                "failed_collectors": list(self.failed_collectors)}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> BaseStateRecord:
        """Read a saved record; an id list that is absent or not a list of strings reads as unknown (then the
        identity rule is not applied rather than applied against a wrong set)."""
        selectors = value.get("selector_ids")
        if not isinstance(selectors, Mapping) or any(_id_list(ids) is None for ids in selectors.values()):
            selectors = None
        return cls(value["task_id"], value["pinned_ref"], value.get("exit_code"), value.get("report_problem"),
                   value.get("counts"), tuple(value.get("recorded_initial_counts") or ()),
                   value.get("matches_recorded"), _id_list(value.get("skipped_or_xfailed_ids")),
                   _id_list(value.get("collected_ids")),
                   None if selectors is None else {str(s): _id_list(ids) or () for s, ids in selectors.items()},
                   _id_list(value.get("failed_collectors")) or ())

    def floor(self, spec: TaskSpec) -> Baseline | None:
        """The floor of decisions 9, 12 and 14 this record sets; without a usable base report, the release's
        recorded counts (count rule only); None when neither exists."""
        if self.counts:
            ids = None if self.skipped_or_xfailed_ids is None else frozenset(self.skipped_or_xfailed_ids)
            collected = None if self.collected_ids is None else frozenset(self.collected_ids)
            selectors = None if self.selector_ids is None else {
                selector: frozenset(found) for selector, found in self.selector_ids.items() if found}
            return Baseline(self.counts["skipped"] + self.counts.get("xfailed", 0), self.counts["collected"],
                            "base_run", ids, collected, selectors, frozenset(self.failed_collectors))
        if spec.initial_counts:
            snapshot = spec.initial_counts[0]
            return Baseline(snapshot["skipped"], snapshot["collected"], "recorded_initial_counts")
        return None

    def problem(self) -> str | None:
        """What is wrong with the image as its base run shows it, for the report; None when it agrees."""
        if self.counts is None:
            return f"the base state's evaluator gave no usable report ({self.report_problem})"
        if self.matches_recorded is False:
            return (f"the base state's counts {dict(self.counts)} differ from the recorded initial counts "
                    f"{[dict(c) for c in self.recorded_initial_counts]}")
        return None


def measure(bench: Workbench) -> BaseStateRecord:
    """Run the evaluator on the base state; return the record kept with the run.

    `skipped_or_xfailed_ids` lists, sorted, every node id the base run skipped or xfailed (tests, and collectors
    skipped whole), or is None when the run gave no usable report or no `tests` list. Decision 12 reads any id
    outside this list as "not skipped at base", including ids the base run never had: the task's test targets are
    restored from the base, so a new id only appears when code under test renames or adds tests, and skipping
    such a test is what the rule is there to catch (see `grading.newly_skipped`).

    `collected_ids` lists every node id of the base run's report (sentinels out), and `selector_ids` the node ids
    the base's probes collected for each selector (decision 14): the tests each prediction is scored on.

    A task with a native build is built at base first, as every state is; a base that does not build is the
    image's fault.

    Raises:
        SandboxUnavailableError: the container engine failed, or the base state did not build.
    """
    spec = bench.spec
    with bench.built(b"") as built:
        if built is not None and not built.ready:
            prep = built.preparation
            tail = built.run.output_tail[-2000:] if built.run else f"{prep.unusable_reason or ''} {prep.patch_log}"
            raise SandboxUnavailableError(f"the base state of {spec.task_id} does not build in {spec.pinned_ref}, "
                                          f"so the image cannot grade anything: {tail}")
        _, run = bench.evaluate(b"", built)
        probes = bench.probe(b"", built)[1] if bench.settings.run_probes else None
    # The base is read as predictions are: sentinels out, pytest's exit code as it would be without them.
    check = examine(run.report, run.exit_code, run.tail, run.sentinel, output_capped=run.output_capped) if run else None
    report, exit_code = (check.report, check.exit_code) if check else (None, None)
    normalized = normalize_report(report, exit_code, run.tail if run else "")
    counts = None if normalized.synthetic_summary else {
        "collected": normalized.total, "passed": normalized.passed, "failed": normalized.failed,
        "errors": normalized.errors, "skipped": normalized.skipped, "xfailed": normalized.xfailed,
    }
    ids, outcomes = normalized.skipped_or_xfailed_ids, normalized.outcomes
    return BaseStateRecord(spec.task_id, spec.pinned_ref, exit_code, run.report_problem if run else "missing", counts,
                           tuple(spec.initial_counts), _matches(counts, spec.initial_counts),
                           None if counts is None or ids is None else tuple(sorted(ids)),
                           None if counts is None or outcomes is None else tuple(sorted(outcomes)),
                           None if probes is None else _selector_ids(probes, spec.selectors),
                           tuple(sorted(normalized.failed_collectors)))


def _selector_ids(probes: ProbeRun, selectors: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Per selector, the node ids the base's probes collected for it, read as predictions' probes are (sentinels
    out); a selector for which they collected nothing is left out, so it is read by node-id matching alone."""
    clean, _ = examine_probes(probes, "base state")
    found = {selector: tuple(sorted(node.nodeid for node in result.matched))
             for selector, result in selector_results(clean, selectors).items()}
    return {selector: ids for selector, ids in found.items() if ids}


def _id_list(value: Any) -> tuple[str, ...] | None:
    """A saved list of node ids, or None when it is absent or not a list of strings."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def _matches(counts: dict[str, int] | None, recorded: tuple[dict[str, int], ...]) -> bool | None:
    """Whether the measured counts equal one recorded snapshot; None when nothing was recorded."""
    if not recorded:
        return None
    return counts is not None and any(all(counts[k] == snapshot[k] for k in COUNT_KEYS) for snapshot in recorded)
