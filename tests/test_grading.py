"""Final-evaluator normalization, per-prediction grading and probe selector status (METRICS 0.1, 1.4, 2, 3)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from asyncodebench.scoring.grading import (
    NormalizedReport,
    SelectorResult,
    grade,
    group_state,
    normalize_report,
    selector_status,
)

WCWIDTH_SUMMARY = {"passed": 28, "failed": 9, "skipped": 1, "total": 38, "collected": 39, "deselected": 1}


def _report(summary: dict[str, Any] | None = None, collectors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {"summary": summary if summary is not None else {"passed": 3, "total": 3}}
    if collectors is not None:
        report["collectors"] = collectors
    return report


# --- normalize_report: validity, synthetic summary, failure kinds ---------------------------------------------


def test_valid_report_keeps_its_counts_and_has_no_failure_kind() -> None:
    normalized = normalize_report(_report(WCWIDTH_SUMMARY), 1, "")
    assert (normalized.passed, normalized.failed, normalized.skipped) == (28, 9, 1)
    assert (normalized.total, normalized.collected, normalized.errors) == (38, 39, 0)
    assert normalized.failure_kind is None
    assert not normalized.synthetic_summary


def test_missing_report_gets_the_synthetic_zero_of_one_summary() -> None:
    normalized = normalize_report(None, 0, "")
    assert (normalized.passed, normalized.failed, normalized.errors, normalized.total) == (0, 0, 1, 1)
    assert normalized.synthetic_summary
    assert normalized.report_was_missing and not normalized.report_was_invalid
    assert normalized.failure_kind == "missing_report"


def test_report_without_summary_keys_is_invalid_not_missing() -> None:
    normalized = normalize_report({"summary": {"deselected": 2}}, 1, "")
    assert normalized.synthetic_summary
    assert normalized.report_was_invalid and not normalized.report_was_missing
    assert normalized.failure_kind == "evaluator_failed"


def test_summary_with_a_non_integer_count_is_treated_as_invalid() -> None:
    normalized = normalize_report(_report({"passed": "all", "total": 3}), 0, "")
    assert normalized.synthetic_summary and normalized.report_was_invalid


def test_summary_without_total_counts_its_outcomes() -> None:
    normalized = normalize_report(_report({"passed": 3, "failed": 1, "skipped": 2}), 1, "")
    assert normalized.total == 6 and normalized.collected == 6


@pytest.mark.parametrize(
    ("exit_code", "output", "kind"),
    [
        (124, "ERROR collecting tests/test_x.py", "timeout"),
        (2, "==== ERRORS DURING COLLECTION ====", "collection_failed"),
        (1, "ERROR collecting tests/test_a.py", "collection_failed"),
        (4, "ImportError while loading conftest '/w/conftest.py'", "collection_failed"),
        (2, "error during collection of x", "collection_failed"),
        (2, "ImportError while importing test module '/w/tests/test_a.py'", "collection_failed"),
        (5, "no tests ran", "no_tests_collected"),
        (4, "usage: pytest", "pytest_usage_error"),
        (3, "INTERNALERROR>", "pytest_internal_error"),
        (2, "KeyboardInterrupt", "pytest_interrupted"),
        (0, "3 passed", "missing_report"),
        (1, "3 failed", "evaluator_failed"),
        (None, "", "evaluator_failed"),
        (137, "Killed", "evaluator_failed"),
    ],
)
def test_failure_kind_is_the_first_rule_that_applies(exit_code: int | None, output: str, kind: str) -> None:
    """Rule order matters: a timeout wins over collection markers, and markers win over exit codes."""
    normalized = normalize_report(None, exit_code, output)
    assert normalized.failure_kind == kind
    assert normalized.synthetic_summary


def test_failed_collectors_raise_errors_and_total_and_mark_collection_failed() -> None:
    collectors = [
        {"nodeid": "tests/test_a.py", "outcome": "failed"},
        {"nodeid": "tests/test_b.py", "outcome": "failed"},
        {"nodeid": "tests/test_c.py", "outcome": "passed"},
    ]
    normalized = normalize_report(_report({"error": 1, "total": 1}, collectors), 1, "")
    assert normalized.failed_collectors == ("tests/test_a.py", "tests/test_b.py")
    assert normalized.errors == 2 and normalized.total == 2
    assert normalized.failure_kind == "collection_failed"
    assert not normalized.synthetic_summary


def test_failed_collectors_never_lower_larger_counts() -> None:
    collectors = [{"nodeid": "tests/test_a.py", "outcome": "failed"}]
    normalized = normalize_report(_report({"passed": 40, "error": 3, "total": 43}, collectors), 1, "")
    assert normalized.errors == 3 and normalized.total == 43


# --- grade: final success (decision 2) and pass rate (decision 1) ---------------------------------------------


def test_wcwidth_single_run_scores_28_of_38_not_28_of_39() -> None:
    """Example D: the official denominator is summary.total (skipped in, deselected out), not collected."""
    result = grade(normalize_report(_report(WCWIDTH_SUMMARY), 1, ""), 1, expected_total=38)
    assert result.pass_rate == pytest.approx(28 / 38)
    assert result.pass_rate != pytest.approx(28 / 39)
    assert result.denominator == 38 and result.total_source == "report_total"
    assert not result.final_success
    assert result.outcome == "failed"


def test_success_with_skipped_tests_has_pass_rate_below_one() -> None:
    normalized = normalize_report(_report({"passed": 37, "skipped": 2, "total": 39}), 0, "")
    result = grade(normalized, 0, expected_total=39)
    assert result.final_success and result.outcome == "passed"
    assert result.pass_rate == pytest.approx(37 / 39)


@pytest.mark.parametrize(
    ("summary", "exit_code"),
    [
        ({"passed": 3, "total": 3}, 1),  # exit code not 0
        ({"passed": 3, "total": 3}, None),  # unknown exit code is never a success under decision 2
        ({"passed": 2, "failed": 1, "total": 3}, 0),
        ({"passed": 3, "error": 1, "total": 4}, 0),
        ({"total": 0, "collected": 0}, 0),
    ],
)
def test_final_success_needs_every_condition(summary: dict[str, int], exit_code: int | None) -> None:
    assert not grade(normalize_report(_report(summary), exit_code, ""), exit_code, 3).final_success


def test_synthetic_summary_is_never_a_success_even_with_exit_zero() -> None:
    normalized = NormalizedReport(3, 0, 0, 0, 3, 3, True, "missing_report", (), True, False)
    result = grade(normalized, 0, 3)
    assert not result.final_success
    assert result.outcome == "model_failure:missing_report"


def test_collection_failure_scores_zero_against_the_expected_total() -> None:
    """Example E: a task whose run failed collection counts 0/215 instead of leaving the mean."""
    normalized = normalize_report(None, 2, "ERROR collecting tests/test_core.py")
    result = grade(normalized, 2, expected_total=215)
    assert result.pass_rate == 0.0
    assert result.denominator == 215
    assert result.total_source == "expected_total_due_collection_failure"
    assert result.outcome == "model_failure:collection_failed"


def test_partial_collection_failure_uses_the_larger_expected_total() -> None:
    collectors = [{"nodeid": "tests/test_b.py", "outcome": "failed"}]
    normalized = normalize_report(_report({"passed": 150, "total": 200}, collectors), 1, "")
    result = grade(normalized, 1, expected_total=215)
    assert result.pass_rate == pytest.approx(150 / 215)
    assert result.total_source == "expected_total_due_collection_failure"


@pytest.mark.parametrize(
    ("report", "exit_code", "source"),
    [
        (None, 124, "expected_total_due_timeout"),
        (_report({"total": 0, "collected": 0}), 5, "expected_total_due_no_tests_collected"),
        (_report({"total": 0, "collected": 4, "deselected": 4}), 5, "expected_total_due_no_tests_collected"),
        (None, 1, "expected_total_due_synthetic_summary"),
    ],
)
def test_broken_runs_take_the_expected_total(report: dict[str, Any] | None, exit_code: int, source: str) -> None:
    result = grade(normalize_report(report, exit_code, ""), exit_code, expected_total=40)
    assert (result.pass_rate, result.denominator, result.total_source) == (0.0, 40, source)


def test_no_known_total_is_reported_as_unavailable_not_none() -> None:
    result = grade(normalize_report(None, 124, ""), 124, expected_total=None)
    assert result.pass_rate == 0.0
    assert result.denominator is None
    assert result.total_source == "unavailable"


def test_non_positive_expected_total_is_refused() -> None:
    with pytest.raises(ValueError, match="positive test count"):
        grade(normalize_report(None, 1, ""), 1, expected_total=0)


# --- probe selectors (METRICS 0.1 steps 2-3, decision 8) -------------------------------------------------------


def _tests(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"nodeid": nodeid, "outcome": outcome} for nodeid, outcome in pairs]


def test_parameterized_nodes_match_their_selector_and_all_must_pass() -> None:
    tests = _tests(("t.py::test_a[1]", "passed"), ("t.py::test_a[x-[2]]", "failed"), ("t.py::test_ab", "passed"))
    result = selector_status("t.py::test_a", tests, 1, False)
    assert result.status == "failed" and not result.passed
    assert [node.nodeid for node in result.matched] == ["t.py::test_a[1]", "t.py::test_a[x-[2]]"]


def test_a_longer_test_name_is_not_a_param_match() -> None:
    result = selector_status("t.py::test_a", _tests(("t.py::test_ab", "passed")), 0, False)
    assert result.status == "not_collected"


def test_selector_passes_when_every_matched_node_passed() -> None:
    result = selector_status("t.py::T::test_x", _tests(("t.py::T::test_x", "passed")), 0, False)
    assert result.status == "passed" and result.passed
    assert result.to_record() == {
        "status": "passed", "passed": True,
        "matched_nodeids": [{"nodeid": "t.py::T::test_x", "outcome": "passed"}],
    }


@pytest.mark.parametrize("outcome", ["skipped", "xfailed", "xpassed", "error"])
def test_skipped_xfail_and_error_nodes_are_not_passed(outcome: str) -> None:
    result = selector_status("t.py::test_x", _tests(("t.py::test_x", outcome)), 0, False)
    assert result.status == "failed" and not result.passed


@pytest.mark.parametrize(("exit_code", "timed_out"), [(124, False), (-1, False), (None, True)])
def test_a_stopped_probe_without_nodes_is_timed_out(exit_code: int | None, timed_out: bool) -> None:
    result = selector_status("t.py::test_x", [], exit_code, timed_out)
    assert result.status == "timed_out" and not result.passed


def test_a_collection_error_leaves_the_selector_not_collected() -> None:
    result = selector_status("t.py::test_x", [], 2, False)
    assert result.status == "not_collected" and not result.passed and result.matched == ()


def test_one_batched_report_gives_the_same_status_as_per_selector_reports() -> None:
    """Decision 8: reading a selector from a run of all selectors equals reading it from its own run."""
    per_selector = {
        "a.py::test_1": _tests(("a.py::test_1", "passed")),
        "a.py::test_2": _tests(("a.py::test_2[p]", "passed"), ("a.py::test_2[q]", "skipped")),
        "b.py::test_3": _tests(("b.py::test_3", "failed")),
        "c.py::test_4": [],
    }
    batched = [test for tests in per_selector.values() for test in tests]
    for selector, own_tests in per_selector.items():
        own = selector_status(selector, own_tests, 2 if not own_tests else 1, False)
        assert selector_status(selector, batched, 1, False) == own


def _results(**passed: bool) -> dict[str, SelectorResult]:
    return {name: SelectorResult(name, "passed" if ok else "failed", ok, ()) for name, ok in passed.items()}


def test_group_passes_only_when_every_selector_passed() -> None:
    results = _results(a=True, b=False, c=True)
    assert group_state(["a", "c"], results).passed
    failing = group_state(["a", "b", "c"], results)
    assert not failing.passed and (failing.passed_count, failing.total) == (2, 3)


def test_an_empty_selector_list_never_passes() -> None:
    state = group_state([], _results(a=True))
    assert not state.passed and (state.passed_count, state.total) == (0, 0)


def test_group_state_refuses_an_unprobed_selector() -> None:
    with pytest.raises(ValueError, match="probe every selector"):
        group_state(["a", "missing"], _results(a=True))


# --- decision 9: the base state is the floor -------------------------------------------------------------------

def _real(passed: int, failed: int, skipped: int = 0, xfailed: int = 0) -> dict:
    total = passed + failed + skipped + xfailed
    return {"summary": {"passed": passed, "failed": failed, "skipped": skipped, "xfailed": xfailed,
                        "total": total, "collected": total}}


def test_skips_beyond_the_base_state_block_final_success() -> None:
    from asyncodebench.scoring.grading import Baseline

    base = Baseline(skipped_or_xfailed=1, total=10, source="base_run")
    inflated = normalize_report(_real(passed=2, failed=0, skipped=5, xfailed=3), 0, "")
    graded = grade(inflated, 0, 10, base)
    assert (graded.final_success, graded.outcome) == (False, "model_failure:integrity_skip_inflation")
    assert graded.pass_rate == 0.2  # skips never count as passed
    honest = normalize_report(_real(passed=9, failed=0, skipped=1), 0, "")
    assert grade(honest, 0, 10, base).final_success is True


def test_a_shrunk_collection_is_scored_against_the_base_total() -> None:
    from asyncodebench.scoring.grading import Baseline

    base = Baseline(skipped_or_xfailed=0, total=10, source="base_run")
    shrunk = normalize_report(_real(passed=4, failed=0), 0, "")
    graded = grade(shrunk, 0, None, base)
    assert (graded.final_success, graded.outcome) == (False, "model_failure:integrity_collection_shrunk")
    assert (graded.denominator, graded.pass_rate) == (10, 0.4)
    assert grade(shrunk, 0, 12, base).denominator == 12  # the expected total, when larger, as for other reasons


# --- decision 12: skips and xfails compared test by test ----------------------------------------------------------

def _run(outcomes: dict[str, str], collectors: list[dict[str, Any]] | None = None,
         with_tests: bool = True) -> dict[str, Any]:
    """A pytest-json-report whose summary is counted from its `tests`, as the plugin does."""
    summary: dict[str, int] = {}
    for outcome in outcomes.values():
        summary[outcome] = summary.get(outcome, 0) + 1
    summary["total"] = summary["collected"] = len(outcomes)
    report: dict[str, Any] = {"summary": summary, "collectors": collectors or []}
    if with_tests:
        report["tests"] = [{"nodeid": nodeid, "outcome": outcome} for nodeid, outcome in outcomes.items()]
    return report


# The base state: a and b skipped or xfailed, c and d failing, the rest passing.
BASE_OUTCOMES = {"t.py::test_a": "skipped", "t.py::test_b": "xfailed", "t.py::test_c": "failed",
                 "t.py::test_d": "failed", **{f"t.py::test_p{i}": "passed" for i in range(6)}}


def _base(with_ids: bool = True) -> Any:
    from asyncodebench.scoring.grading import Baseline

    normalized = normalize_report(_run(BASE_OUTCOMES), 1, "")
    ids = normalized.skipped_or_xfailed_ids if with_ids else None
    return Baseline(normalized.skipped_or_xfailed, normalized.total, "base_run", ids)


def _graded(outcomes: dict[str, str], baseline: Any, **report: Any) -> tuple[Any, dict[str, Any]]:
    from asyncodebench.scoring.grading import skip_integrity_record

    normalized = normalize_report(_run(outcomes, **report), 0, "")
    return grade(normalized, 0, len(BASE_OUTCOMES), baseline), skip_integrity_record(normalized, baseline)


def test_the_base_records_the_ids_it_skipped_or_xfailed() -> None:
    assert _base().skipped_or_xfailed_ids == {"t.py::test_a", "t.py::test_b"}
    assert _base().skipped_or_xfailed == 2


def test_a_swap_of_skips_passes_the_count_rule_but_breaks_the_identity_rule() -> None:
    """The red team's attack: un-skip the base's skipped tests and skip as many failing ones (same count)."""
    swapped = {**BASE_OUTCOMES, "t.py::test_a": "passed", "t.py::test_b": "passed",
               "t.py::test_c": "skipped", "t.py::test_d": "xfailed"}
    graded, record = _graded(swapped, _base())
    assert (graded.final_success, graded.outcome) == (False, "model_failure:integrity_skip_inflation")
    assert graded.pass_rate == 0.8  # scores only what passed, as before
    assert record == {"skip_rules_broken": ["identity"], "newly_skipped": {
        "checked": True, "count": 2, "node_ids": ["t.py::test_c", "t.py::test_d"]}}


def test_un_skipping_alone_is_fine() -> None:
    graded, record = _graded({**BASE_OUTCOMES, "t.py::test_a": "passed", "t.py::test_b": "passed",
                              "t.py::test_c": "passed", "t.py::test_d": "passed"}, _base())
    assert (graded.final_success, graded.outcome, graded.pass_rate) == (True, "passed", 1.0)
    assert record["skip_rules_broken"] == [] and record["newly_skipped"]["count"] == 0


def test_the_same_skips_as_the_base_are_fine() -> None:
    graded, record = _graded({**BASE_OUTCOMES, "t.py::test_c": "passed", "t.py::test_d": "passed"}, _base())
    assert (graded.final_success, graded.outcome) == (True, "passed")
    assert record == {"skip_rules_broken": [], "newly_skipped": {"checked": True, "count": 0, "node_ids": []}}


def test_a_skipped_test_becoming_xfailed_stays_within_the_rule() -> None:
    graded, _ = _graded({**BASE_OUTCOMES, "t.py::test_a": "xfailed", "t.py::test_c": "passed",
                         "t.py::test_d": "passed"}, _base())
    assert graded.final_success is True


def test_an_old_baseline_without_ids_keeps_the_count_rule_alone() -> None:
    """Base records made before decision 12 have no id list: the swap then passes, as it did under decision 9."""
    swapped = {**BASE_OUTCOMES, "t.py::test_a": "passed", "t.py::test_b": "passed",
               "t.py::test_c": "skipped", "t.py::test_d": "xfailed"}
    graded, record = _graded(swapped, _base(with_ids=False))
    assert (graded.final_success, graded.outcome) == (True, "passed")
    assert record == {"skip_rules_broken": [], "newly_skipped": {"checked": False, "count": 0, "node_ids": []}}
    inflated, record = _graded({**swapped, "t.py::test_p0": "skipped"}, _base(with_ids=False))
    assert inflated.outcome == "model_failure:integrity_skip_inflation"
    assert record["skip_rules_broken"] == ["count"]


def test_both_rules_are_named_when_both_break() -> None:
    graded, record = _graded({**BASE_OUTCOMES, "t.py::test_c": "skipped", "t.py::test_d": "skipped"}, _base())
    assert graded.outcome == "model_failure:integrity_skip_inflation"
    assert record["skip_rules_broken"] == ["count", "identity"]


def test_a_report_without_tests_cannot_be_compared_by_id() -> None:
    swapped = {**BASE_OUTCOMES, "t.py::test_a": "passed", "t.py::test_b": "passed",
               "t.py::test_c": "skipped", "t.py::test_d": "xfailed"}
    graded, record = _graded(swapped, _base(), with_tests=False)
    assert graded.final_success is True and record["newly_skipped"]["checked"] is False


def test_a_new_test_id_that_is_skipped_breaks_the_identity_rule() -> None:
    """Parameters built from code under test can rename a failing test; skipping it under its new id is caught."""
    renamed = {k: v for k, v in BASE_OUTCOMES.items() if k != "t.py::test_c"}
    renamed.update({"t.py::test_a": "passed", "t.py::test_c[renamed]": "skipped", "t.py::test_d": "passed"})
    graded, record = _graded(renamed, _base())
    assert graded.outcome == "model_failure:integrity_skip_inflation"
    assert record["newly_skipped"]["node_ids"] == ["t.py::test_c[renamed]"]


def test_a_module_skipped_whole_counts_by_its_collector_id() -> None:
    """A module-level skip leaves no test in `tests`, only its collector (and fewer tests: collection shrinks)."""
    kept = {k: v for k, v in BASE_OUTCOMES.items() if k not in ("t.py::test_c", "t.py::test_d")}
    kept.update({"t.py::test_a": "passed", "t.py::test_b": "passed", "u.py::test_x": "passed",
                 "u.py::test_y": "passed"})  # the same total, from tests added elsewhere
    collectors = [{"nodeid": "t_failing.py", "outcome": "skipped", "result": []}]
    graded, record = _graded(kept, _base(), collectors=collectors)
    assert graded.outcome == "model_failure:integrity_skip_inflation"
    assert record["newly_skipped"]["node_ids"] == ["t_failing.py"]


def test_the_newly_skipped_ids_are_capped_and_counted() -> None:
    from asyncodebench.scoring.grading import NEWLY_SKIPPED_CAP

    many = {f"t.py::test_n{i:03d}": "skipped" for i in range(NEWLY_SKIPPED_CAP + 7)}
    _, record = _graded({**BASE_OUTCOMES, **many}, _base())
    assert record["newly_skipped"]["count"] == NEWLY_SKIPPED_CAP + 7
    assert record["newly_skipped"]["node_ids"] == sorted(many)[:NEWLY_SKIPPED_CAP]


def test_garbage_test_entries_do_not_count_as_ids() -> None:
    from asyncodebench.scoring.grading import skipped_or_xfailed_ids

    report = {"tests": [None, 3, {"nodeid": 5, "outcome": "skipped"}, {"outcome": "skipped"},
                        {"nodeid": "t.py::test_s", "outcome": "skipped"}], "collectors": "nonsense"}
    assert skipped_or_xfailed_ids(report) == {"t.py::test_s"}
    assert skipped_or_xfailed_ids({"tests": {"not": "a list"}}) is None


def test_a_probe_selector_whose_failure_became_a_skip_is_not_passed() -> None:
    """Probes need no base comparison: a skipped or xfailed node never passes a selector, so a skip that replaces
    the base's failure leaves the selector failing."""
    base = selector_status("t.py::test_c", _tests(("t.py::test_c", "failed")), 1, False)
    for outcome in ("skipped", "xfailed"):
        evaluated = selector_status("t.py::test_c", _tests(("t.py::test_c", outcome)), 0, False)
        assert (base.passed, evaluated.passed, evaluated.status) == (False, False, "failed")
    mixed = selector_status("t.py::test_c", _tests(("t.py::test_c[1]", "passed"), ("t.py::test_c[2]", "skipped")),
                            0, False)
    assert not mixed.passed


# --- the base-state record (harness/baseline.py) ------------------------------------------------------------------

class _FakeRun:
    def __init__(self, report: dict[str, Any] | None) -> None:
        self.report, self.exit_code, self.tail, self.report_problem = report, 1, "", None
        self.sentinel, self.output_capped = None, False  # evidence without sentinels is read as it is


class _FakeBench:
    """Enough of a Workbench for `baseline.measure`: its spec, and an evaluator that returns a fixed report."""

    def __init__(self, report: dict[str, Any] | None) -> None:
        from types import SimpleNamespace

        self.spec = SimpleNamespace(task_id="asyncodebench-demo:x", pinned_ref="img@sha256:0", initial_counts=())
        self.settings = SimpleNamespace(run_probes=False)  # the base's probes: tests/test_identity_grading.py
        self._run = _FakeRun(report)

    @contextmanager
    def built(self, patch: bytes) -> Iterator[None]:  # a task without a native build
        yield None

    def evaluate(self, patch: bytes, built: None = None) -> tuple[None, _FakeRun]:
        assert patch == b"" and built is None
        return None, self._run


def test_the_base_record_keeps_its_skipped_ids_and_old_records_give_the_count_rule() -> None:
    from types import SimpleNamespace

    from asyncodebench.harness import baseline

    record = baseline.measure(_FakeBench(_run(BASE_OUTCOMES)))
    assert record.skipped_or_xfailed_ids == ("t.py::test_a", "t.py::test_b")
    spec = SimpleNamespace(initial_counts=())
    floor = record.floor(spec)
    assert floor is not None and floor.skipped_or_xfailed_ids == {"t.py::test_a", "t.py::test_b"}
    assert (floor.skipped_or_xfailed, floor.total) == (2, 10)
    saved = record.to_json()
    assert baseline.BaseStateRecord.from_json(saved) == record
    old = {k: v for k, v in saved.items() if k != "skipped_or_xfailed_ids"}
    assert baseline.BaseStateRecord.from_json(old).floor(spec).skipped_or_xfailed_ids is None
    bad = {**saved, "skipped_or_xfailed_ids": [1, None]}
    assert baseline.BaseStateRecord.from_json(bad).floor(spec).skipped_or_xfailed_ids is None
    assert baseline.measure(_FakeBench(_run(BASE_OUTCOMES, with_tests=False))).skipped_or_xfailed_ids is None
    assert baseline.measure(_FakeBench(None)).skipped_or_xfailed_ids is None
