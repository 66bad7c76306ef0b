"""Grade one prediction from its final evaluator run, and read probe selectors from probe runs.

Everything here is a pure function over parsed pytest-json-report data, the exit code and the captured output, so a
saved run can be re-graded without containers. The rules are those of METRICS.md sections 0.1, 1.4, 2 and 3, with
the project decisions 1 (pass rate against the expected total, never dropped), 2 (final success), 8 (probe
semantics), 9 (the base state is the floor), 12 (skips and xfails compared by test, not only by count) and 14
(collected tests scored by identity) applied where the upstream scripts disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TIMEOUT_EXIT_CODE = 124
"""Exit code of coreutils `timeout` when it had to stop the command."""

COLLECTION_MARKERS = (
    "error collecting",
    "errors during collection",
    "error during collection",
    "importerror while loading conftest",
    "importerror while importing test module",
)
"""Lowercase output fragments that mean pytest could not collect (METRICS 1.4, rule 2)."""

_EXIT_CODE_KINDS = (
    (5, "no_tests_collected"),
    (4, "pytest_usage_error"),
    (3, "pytest_internal_error"),
    (2, "pytest_interrupted"),
    (0, "missing_report"),
)
"""Failure kinds read from the exit code, in rule order, after the timeout and collection rules."""

_SUMMARY_KEYS = ("passed", "failed", "error", "total")
"""A summary holding any of these keys counts as real (METRICS 1.4)."""

_OUTCOME_KEYS = ("passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed")
"""Per-outcome counts summed when a summary omits `total`."""

SELECTOR_STATUSES = ("passed", "failed", "not_collected", "timed_out")
"""Every status a probe selector can have (METRICS 0.1 step 2)."""

SKIP_LIKE_TEST_OUTCOMES = frozenset({"skipped", "xfailed"})
"""Test outcomes that never block the exit code yet are no pass: what decision 12 compares test by test."""

NEWLY_SKIPPED_CAP = 50
"""How many newly skipped or xfailed node ids a result record lists (the count is always complete)."""

MISSING_IDS_CAP = 50
"""How many base tests missing from the evaluated run a result record lists (the count is always complete)."""


@dataclass(frozen=True)
class NormalizedReport:
    """The final evaluator's report summary after the validity and failure-kind rules."""

    passed: int  # tests that passed
    failed: int  # tests that failed
    errors: int  # errored tests, raised to at least the number of failed collectors
    skipped: int  # skipped tests (still part of `total`)
    total: int  # summary.total: skipped included, deselected excluded
    collected: int  # summary.collected (deselected included), or `total` when absent
    synthetic_summary: bool  # True when the report was missing or invalid and a 0/1 placeholder stands in
    failure_kind: str | None  # evaluation_failure_kind, or None when the run was not a model failure of a known kind
    failed_collectors: tuple[str, ...]  # node ids of collectors whose outcome is "failed"
    report_was_missing: bool  # no report was given at all
    report_was_invalid: bool  # a report was given but its summary was not usable
    xfailed: int = 0  # expected failures: like skips, they never block the exit code (decision 9)
    # Node ids of tests whose outcome is skipped or xfailed, plus collectors (modules) skipped whole; None when the
    # report has no `tests` list (or is synthetic), so the identity rule of decision 12 cannot be applied.
    skipped_or_xfailed_ids: frozenset[str] | None = None
    # Every test of the report by node id, with its outcome (decision 14); None without a `tests` list.
    outcomes: Mapping[str, str] | None = None

    @property
    def skipped_or_xfailed(self) -> int:
        """Tests that were skipped or xfailed: outcomes that never block the exit code."""
        return self.skipped + self.xfailed


@dataclass(frozen=True)
class Baseline:
    """What the base state scores in the same image under the same evaluator (decision 9): the floor an evaluated
    run is held to, so code under test cannot turn its failures into skips or shrink what is collected."""

    skipped_or_xfailed: int
    total: int
    source: str  # "base_run" (measured in this run) or "recorded_initial_counts" (the base run had no report)
    # Node ids skipped or xfailed at base (decision 12); None for records made before it, or without a `tests`
    # list: then only the count rule applies.
    skipped_or_xfailed_ids: frozenset[str] | None = None
    # Node ids of every test the base state's evaluator collected (decision 14); None for records made before it,
    # or without a `tests` list: then the evaluated run's own counts are scored, as before.
    collected_ids: frozenset[str] | None = None
    # Per probe selector, the node ids the base state's probes collected for it (decision 14); a selector absent
    # here (the base collected nothing for it, or the record predates it) is read by node-id matching alone.
    selector_ids: Mapping[str, frozenset[str]] | None = None
    # Node ids of the collectors (modules, packages) whose collection failed at base: their tests were never
    # listed there, so an evaluated test inside one of them is one of the task's own tests and is scored.
    failed_collectors: frozenset[str] = frozenset()


@dataclass(frozen=True)
class IdentityCheck:
    """The evaluated run's tests set against those the base state collected (decision 14)."""

    passed: int  # base tests that passed in the evaluated run: the pass rate's numerator
    missing: tuple[str, ...]  # base tests the evaluated run does not list (dropped, renamed, not collected), sorted
    added: int  # tests of the evaluated run that the base did not collect: never counted


@dataclass(frozen=True)
class GradeResult:
    """The per-prediction scores that feed FSR and the mean pass rate."""

    final_success: bool  # decision 2
    passed: int  # numerator of the pass rate
    pass_rate: float  # passed / denominator; 0.0 when no denominator is known (see total_source)
    denominator: int | None  # the expected total used, None only when total_source == "unavailable"
    total_source: str  # "report_total", "expected_total_due_<reason>" or "unavailable"
    outcome: str  # "passed", "model_failure:<kind>" or "failed" (bundle final_test.outcome)


@dataclass(frozen=True)
class NodeOutcome:
    """One test node of a probe report that a selector matched."""

    nodeid: str  # full pytest node id, parameter suffix included
    outcome: str  # pytest-json-report outcome: passed, failed, skipped, xfailed, xpassed, error


@dataclass(frozen=True)
class SelectorResult:
    """The status of one probe selector in one checkpoint."""

    selector: str  # pytest node id selector from a dependency row
    status: str  # one of SELECTOR_STATUSES
    passed: bool  # True only when status == "passed"
    matched: tuple[NodeOutcome, ...]  # report nodes equal to the selector or to it plus a [param] suffix

    def to_record(self) -> dict[str, Any]:
        """Return the `probe_test_results` entry of the checkpoint record layout."""
        return {
            "status": self.status,
            "passed": self.passed,
            "matched_nodeids": [{"nodeid": node.nodeid, "outcome": node.outcome} for node in self.matched],
        }


@dataclass(frozen=True)
class GroupState:
    """Whether one probe group (upstream, downstream or integrated) of a dependency passes."""

    selectors: tuple[str, ...]  # the group's selectors, in dependency-row order
    passed: bool  # non-empty and every selector passed; an empty group never passes
    passed_count: int  # selectors that passed
    total: int  # number of selectors

    def to_record(self) -> dict[str, Any]:
        """Return the `groups.<name>` entry of the checkpoint record layout."""
        return {
            "selectors": list(self.selectors),
            "passed": self.passed,
            "passed_count": self.passed_count,
            "total": self.total,
        }


def _count(summary: Mapping[str, Any], *keys: str) -> int | None:
    """Return the first of `keys` present in `summary` as a count, or None when none is present.

    Raises:
        ValueError: a present count is not a non-negative integer, so the summary cannot be trusted.
    """
    for key in keys:
        if key in summary:
            value = summary[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"summary.{key} is {value!r}, not a non-negative integer")
            return value
    return None


def failed_collectors(report: Mapping[str, Any]) -> tuple[str, ...]:
    """Node ids of the report's collectors whose outcome is "failed"."""
    collectors = report.get("collectors")
    if not isinstance(collectors, list):
        return ()
    return tuple(
        str(entry.get("nodeid", ""))
        for entry in collectors
        if isinstance(entry, Mapping) and entry.get("outcome") == "failed"
    )


def skipped_or_xfailed_ids(report: Mapping[str, Any]) -> frozenset[str] | None:
    """The node ids a report shows as skipped or xfailed: tests with either outcome, and collectors skipped whole
    (a module-level skip or `importorskip` leaves no test behind, only its skipped collector).

    None when the report has no `tests` list: pytest-json-report always writes one (empty or not) unless asked for
    a summary only, so its absence means the ids are unknown, not that nothing was skipped. Entries that are not
    objects with a string node id are ignored: the report comes from code under test's process.
    """
    tests = report.get("tests")
    if not isinstance(tests, list):
        return None
    found = {entry["nodeid"] for entry in tests
             if isinstance(entry, Mapping) and isinstance(entry.get("nodeid"), str)
             and entry.get("outcome") in SKIP_LIKE_TEST_OUTCOMES}
    collectors = report.get("collectors")
    if isinstance(collectors, list):
        found |= {entry["nodeid"] for entry in collectors
                  if isinstance(entry, Mapping) and isinstance(entry.get("nodeid"), str)
                  and entry.get("outcome") == "skipped"}
    return frozenset(found)


def test_outcomes(report: Mapping[str, Any]) -> dict[str, str] | None:
    """Every test of a report by its exact node id (parameters, brackets and escapes as pytest wrote them), with its
    outcome; None without a `tests` list. Entries that are not objects with a string node id are ignored; a node id
    listed twice keeps its worst outcome (anything but "passed" wins), so a duplicate cannot hide a failure."""
    tests = report.get("tests")
    if not isinstance(tests, list):
        return None
    found: dict[str, str] = {}
    for entry in tests:
        if isinstance(entry, Mapping) and isinstance(entry.get("nodeid"), str):
            outcome = str(entry.get("outcome"))
            if found.get(entry["nodeid"], "passed") == "passed":
                found[entry["nodeid"]] = outcome
    return found


def _invalid_run_kind(exit_code: int | None, output_text: str) -> str:
    """Pick the failure kind of a run without a usable summary: the first rule of METRICS 1.4 that applies."""
    if exit_code == TIMEOUT_EXIT_CODE:
        return "timeout"
    lowered = output_text.lower()
    if any(marker in lowered for marker in COLLECTION_MARKERS):
        return "collection_failed"
    for code, kind in _EXIT_CODE_KINDS:
        if exit_code == code:
            return kind
    return "evaluator_failed"


def _synthetic(report: Mapping[str, Any] | None, exit_code: int | None, output_text: str) -> NormalizedReport:
    """The 0 passed / 1 error placeholder that keeps a broken run in every denominator."""
    return NormalizedReport(
        passed=0, failed=0, errors=1, skipped=0, total=1, collected=1,
        synthetic_summary=True,
        failure_kind=_invalid_run_kind(exit_code, output_text),
        failed_collectors=failed_collectors(report) if report is not None else (),
        report_was_missing=report is None,
        report_was_invalid=report is not None,
    )


def normalize_report(report: dict[str, Any] | None, exit_code: int | None, output_text: str) -> NormalizedReport:
    """Turn a final evaluator report into counts that cannot be gamed by a missing or broken report.

    Pass None when no report file exists. A file that exists but is not valid JSON should be passed as `{}`, so it
    is recorded as invalid rather than missing. Beyond METRICS 1.4, a summary whose counts are not non-negative
    integers is also treated as invalid, because such numbers cannot be scored.

    Args:
        report: the parsed pytest-json-report, or None when the evaluator wrote none.
        exit_code: the evaluator's exit code (124 means the timeout fired), or None when unknown.
        output_text: the evaluator's captured stdout and stderr, searched for collection-error markers.
    """
    if report is None:
        return _synthetic(None, exit_code, output_text)
    summary = report.get("summary")
    if not isinstance(summary, Mapping) or not any(key in summary for key in _SUMMARY_KEYS):
        return _synthetic(report, exit_code, output_text)
    try:
        passed, failed, skipped, xfailed = (_count(summary, key) or 0 for key in ("passed", "failed", "skipped",
                                                                                   "xfailed"))
        errors = _count(summary, "error", "errors") or 0
        total = _count(summary, "total")
        if total is None:
            total = sum(_count(summary, key) or 0 for key in _OUTCOME_KEYS)
        collected = _count(summary, "collected")
    except ValueError:
        return _synthetic(report, exit_code, output_text)
    collectors = failed_collectors(report)
    return NormalizedReport(
        passed=passed, failed=failed,
        errors=max(errors, len(collectors)),
        skipped=skipped,
        total=max(total, len(collectors)),
        collected=total if collected is None else collected,
        synthetic_summary=False,
        failure_kind="collection_failed" if collectors else None,
        failed_collectors=collectors,
        report_was_missing=False,
        report_was_invalid=False,
        xfailed=xfailed,
        skipped_or_xfailed_ids=skipped_or_xfailed_ids(report),
        outcomes=test_outcomes(report),
    )


def identity_check(normalized: NormalizedReport, baseline: Baseline | None) -> IdentityCheck | None:
    """The evaluated run's tests against the base state's, by exact node id (decision 14); None when either side's
    ids are unknown (a base record from before decision 14, a report without `tests`, a synthetic summary).

    A base test counts as passed only when the evaluated run lists that very node id as passed; one it does not
    list at all (dropped, renamed, its module no longer collected, its parameters changed) is missing, which
    grading scores as a failure. Tests only the evaluated run has are counted apart and never scored, except those
    inside a collector that failed at base (a test module the base could not import): the task's own tests,
    restored from the base, that only a working implementation lets pytest list.
    """
    if baseline is None or baseline.collected_ids is None or normalized.synthetic_summary:
        return None
    outcomes = normalized.outcomes
    if outcomes is None:
        return None
    base = baseline.collected_ids
    uncollected = [_collector_prefix(nodeid) for nodeid in baseline.failed_collectors]
    scored = [nodeid for nodeid in outcomes if nodeid in base or any(nodeid.startswith(p) for p in uncollected)]
    return IdentityCheck(passed=sum(1 for nodeid in scored if outcomes[nodeid] == "passed"),
                         missing=tuple(sorted(nodeid for nodeid in base if nodeid not in outcomes)),
                         added=len(outcomes) - len(scored))


def _collector_prefix(nodeid: str) -> str:
    """What the node ids of a collector's tests start with: `tests/test_x.py::` for a module (or a class in it),
    `tests/sub/` for a folder."""
    if "::" in nodeid or nodeid.endswith(".py"):
        return nodeid + "::"
    return nodeid.rstrip("/") + "/"


def identity_record(normalized: NormalizedReport, baseline: Baseline | None) -> dict[str, Any]:
    """The result record's account of decision 14: whether the base's ids were known (`checked`), how many base
    tests the run did not list (the first MISSING_IDS_CAP of them, sorted) and how many it added (never scored)."""
    check = identity_check(normalized, baseline)
    if check is None:
        return {"checked": False, "missing_count": 0, "missing": [], "added_count": 0}
    return {"checked": True, "missing_count": len(check.missing), "missing": list(check.missing[:MISSING_IDS_CAP]),
            "added_count": check.added}


def newly_skipped(normalized: NormalizedReport, baseline: Baseline | None) -> tuple[str, ...] | None:
    """Node ids skipped or xfailed in this run that were not skipped or xfailed at base (decision 12), sorted; None
    when either side's ids are unknown (an old base record, a report without `tests`, a synthetic summary).

    "Not skipped or xfailed at base" means "not in the base's skipped-or-xfailed set", so a node id the base run
    did not have at all counts too. Test targets are restored from the base, so their ids only change when code
    under test changes them (parameters built from the code, a module it makes unimportable). Counting such new
    ids closes the rename-then-skip route; it costs an honest patch nothing the count rule would not already
    cost it, because a newly skipped test raises the count unless others were un-skipped to make room, which is
    exactly the swap this rule exists to stop. Un-skipping alone never breaks it.
    """
    if baseline is None or normalized.synthetic_summary:
        return None
    if baseline.skipped_or_xfailed_ids is None or normalized.skipped_or_xfailed_ids is None:
        return None
    return tuple(sorted(normalized.skipped_or_xfailed_ids - baseline.skipped_or_xfailed_ids))


def skip_rules_broken(normalized: NormalizedReport, baseline: Baseline | None) -> tuple[str, ...]:
    """Which skip rules a real report breaks against the base state: "count" (decision 9: more skipped + xfailed
    tests than at base) and "identity" (decision 12: a test skipped or xfailed that was not at base)."""
    if baseline is None or normalized.synthetic_summary:
        return ()
    broken = ("count",) if normalized.skipped_or_xfailed > baseline.skipped_or_xfailed else ()
    return broken + (("identity",) if newly_skipped(normalized, baseline) else ())


def integrity_failure(normalized: NormalizedReport, baseline: Baseline | None) -> str | None:
    """The integrity rule a real report breaks against the base state, or None (decisions 9 and 12).

    Both skip rules give the one outcome kind `integrity_skip_inflation`: the count rule alone is gamed by a patch
    that un-skips the base's skipped tests and skips as many failing ones, which the identity rule catches.
    """
    if baseline is None or normalized.synthetic_summary:
        return None
    if skip_rules_broken(normalized, baseline):
        return "integrity_skip_inflation"
    check = identity_check(normalized, baseline)
    if normalized.total < baseline.total or (check is not None and check.missing):
        return "integrity_collection_shrunk"
    return None


def skip_integrity_record(normalized: NormalizedReport, baseline: Baseline | None) -> dict[str, Any]:
    """The result record's account of the skip rules: which broke, and which node ids broke the identity rule
    (the first NEWLY_SKIPPED_CAP of them, sorted; `count` is complete, `checked` False when ids were unknown)."""
    ids = newly_skipped(normalized, baseline)
    return {"skip_rules_broken": list(skip_rules_broken(normalized, baseline)),
            "newly_skipped": {"checked": ids is not None, "count": len(ids or ()),
                              "node_ids": list((ids or ())[:NEWLY_SKIPPED_CAP])}}


def _substitution_reason(normalized: NormalizedReport, exit_code: int | None,
                         baseline: Baseline | None) -> str | None:
    """Why the report's own total cannot serve as the denominator, or None when it can (decision 1)."""
    if baseline is not None and not normalized.synthetic_summary and normalized.total < baseline.total:
        return "collection_shrunk"
    check = identity_check(normalized, baseline)
    if check is not None and check.missing:  # base tests it does not list count as failed, against the full total
        return "collection_shrunk"
    if exit_code == TIMEOUT_EXIT_CODE or normalized.failure_kind == "timeout":
        return "timeout"
    if normalized.failure_kind == "collection_failed":
        return "collection_failure"
    if normalized.synthetic_summary:
        return "synthetic_summary"
    if normalized.total == 0 or normalized.collected == 0:
        return "no_tests_collected"
    return None


def _outcome(final_success: bool, failure_kind: str | None) -> str:
    """The bundle's `final_test.outcome` label."""
    if final_success:
        return "passed"
    return f"model_failure:{failure_kind}" if failure_kind else "failed"


def grade(normalized: NormalizedReport, exit_code: int | None, expected_total: int | None,
          baseline: Baseline | None = None) -> GradeResult:
    """Score one prediction so that a broken run counts as 0 against the task's size instead of vanishing.

    Final success follows decision 2, so an unknown exit code is never a success. The pass-rate denominator is the
    report's `total`, except when the run timed out, failed collection, collected nothing or only has a synthetic
    summary: then it is the task's expected total, or the observed total when that is larger (as the official
    sibling substitution does). When neither is known the rate is 0.0 (nothing was seen to pass) and
    `total_source` says "unavailable" so the report can flag it.

    When the base state's node ids are known (decision 14), the numerator is the number of base tests that passed
    by their own node id, base tests the run does not list count as failed (no final success), and tests the run
    added are left out of the report's total; a run that lists every base test is scored as before.

    Args:
        normalized: the output of `normalize_report` for this run.
        exit_code: the evaluator's exit code, or None when unknown.
        expected_total: the task's expected `summary.total` from the dataset row, or None when not recorded.
        baseline: the base state's run in the same image (decision 9); None when not measured.
    """
    if expected_total is not None and expected_total <= 0:
        raise ValueError(f"expected_total must be a positive test count or None, got {expected_total}")
    clean_run = (
        exit_code == 0
        and normalized.collected > 0
        and normalized.failed == 0
        and normalized.errors == 0
        and not normalized.synthetic_summary
    )
    integrity = integrity_failure(normalized, baseline)
    final_success = clean_run and integrity is None
    reason = _substitution_reason(normalized, exit_code, baseline)
    check = identity_check(normalized, baseline)
    passed = normalized.passed if check is None else check.passed
    # The run's own total, without the tests it added and with the base tests it dropped (decision 14): the tests it
    # lists by id, so a collector's error (not a test; its base tests are among the missing) is not counted twice.
    scored_total = normalized.total if check is None else len(normalized.outcomes or {}) - check.added + len(
        check.missing)
    observed = 0 if normalized.synthetic_summary else scored_total
    if reason is None:
        denominator, source = scored_total, "report_total"
    elif expected_total is not None and expected_total >= observed:
        denominator, source = expected_total, f"expected_total_due_{reason}"
    elif reason == "collection_shrunk" and baseline is not None:
        denominator, source = baseline.total, "base_total_due_collection_shrunk"
    elif observed > 0:
        denominator, source = observed, "report_total"
    else:
        denominator, source = None, "unavailable"
    return GradeResult(
        final_success=final_success,
        passed=passed,
        pass_rate=passed / denominator if denominator else 0.0,
        denominator=denominator,
        total_source=source,
        outcome=_outcome(final_success, integrity if clean_run and integrity else normalized.failure_kind),
    )


def node_matches(selector: str, nodeid: str) -> bool:
    """A node belongs to a selector when it is the selector itself or the selector plus a `[param]` suffix."""
    return nodeid == selector or (nodeid.startswith(selector + "[") and nodeid.endswith("]"))


def selector_status(
    selector: str, report_tests: Sequence[Mapping[str, Any]], exit_code: int | None, timed_out: bool,
    base_ids: frozenset[str] | None = None,
) -> SelectorResult:
    """Read one selector's status from a probe report (METRICS 0.1 step 2, decision 14).

    The report may come from a pytest run of this selector alone or of many selectors at once: only the nodes that
    belong to the selector are looked at, so both give the same status when the tests are independent. A selector
    passes only when every node of it passed; skipped, xfailed, xpassed and errored nodes make it fail. So a
    skip that replaces a failure never turns a probe into a pass, whatever the base state skipped.

    `base_ids` are the node ids the base state's probes collected for the selector (decision 14). Given, they are
    the selector's tests: each must be in the report by that exact id and have passed, a node id the base did not
    collect is ignored, and a base test the report does not list makes the selector fail (or, when the report
    lists none of them, leaves it not collected or timed out). Without them (the base collected nothing for the
    selector, or its record predates decision 14), the selector's tests are the nodes that match it: itself or it
    plus a `[param]` suffix.

    Args:
        selector: the probe selector, a pytest node id.
        report_tests: the `tests` list of the probe run's pytest-json-report (empty when no report was written).
        exit_code: the probe run's exit code; 124 or -1 mean it was stopped by a timeout.
        timed_out: True when the host-side watchdog stopped the probe run.
        base_ids: the selector's tests as the base state collected them, or None.
    """
    def belongs(nodeid: str) -> bool:
        return nodeid in base_ids if base_ids else node_matches(selector, nodeid)

    matched = tuple(
        NodeOutcome(nodeid=str(test["nodeid"]), outcome=str(test.get("outcome")))
        for test in report_tests
        if isinstance(test.get("nodeid"), str) and belongs(test["nodeid"])
    )
    if not matched:
        stopped = timed_out or exit_code in (TIMEOUT_EXIT_CODE, -1)
        return SelectorResult(selector, "timed_out" if stopped else "not_collected", False, ())
    missing = bool(base_ids) and not base_ids <= {node.nodeid for node in matched}  # type: ignore[operator]
    passed = not missing and all(node.outcome == "passed" for node in matched)
    return SelectorResult(selector, "passed" if passed else "failed", passed, matched)


def group_state(selectors: Sequence[str], results: Mapping[str, SelectorResult]) -> GroupState:
    """Combine selector results into one probe group's state; an empty group never passes.

    Raises:
        ValueError: a selector of the group has no result; probe every selector of the task before grouping.
    """
    missing = [selector for selector in selectors if selector not in results]
    if missing:
        raise ValueError(f"no probe result for selector(s) {missing}; probe every selector of the task first")
    passed_count = sum(1 for selector in selectors if results[selector].passed)
    return GroupState(
        selectors=tuple(selectors),
        passed=bool(selectors) and passed_count == len(selectors),
        passed_count=passed_count,
        total=len(selectors),
    )
