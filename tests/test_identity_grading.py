"""Decision 14: every test the base state collected is scored from its own outcome, by exact node id, in the
evaluated state; tests the patch adds never count. No Docker: the rules are pure functions over reports (the same
attacks run for real in the shared hostile run, tests/helpers/payloads/identity.py)."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator

from asyncodebench.harness import baseline
from asyncodebench.harness.probes import ProbeCall, ProbeRun, selector_results
from asyncodebench.scoring.grading import (
    Baseline,
    grade,
    identity_record,
    normalize_report,
    selector_status,
)

# The base state: 7 passing tests and 18 failing ones, with parametrized, bracketed and escaped-unicode ids.
PASSING = ["t.py::test_ok", "t.py::test_param[a-1]", "t.py::test_param[b-[x]]", "t.py::test_caf\\xe9",
           "t.py::TestK::test_m", "u.py::test_u[\\u03b1]", "u.py::test_v"]
FAILING = [f"t.py::test_f{i}" for i in range(12)] + [f"u.py::test_g[{i}]" for i in range(6)]
BASE = {**dict.fromkeys(PASSING, "passed"), **dict.fromkeys(FAILING, "failed")}
GOLD = dict.fromkeys(BASE, "passed")


def _report(outcomes: dict[str, str]) -> dict[str, Any]:
    """A pytest-json-report whose summary is counted from its tests, as the plugin does."""
    summary: dict[str, int] = {}
    for outcome in outcomes.values():
        summary[outcome] = summary.get(outcome, 0) + 1
    summary["total"] = summary["collected"] = len(outcomes)
    return {"summary": summary, "tests": [{"nodeid": n, "outcome": o} for n, o in outcomes.items()],
            "collectors": []}


def _floor(with_ids: bool = True) -> Baseline:
    return Baseline(0, len(BASE), "base_run", frozenset() if with_ids else None,
                    frozenset(BASE) if with_ids else None)


def _graded(outcomes: dict[str, str], floor: Baseline | None = None) -> tuple[Any, dict[str, Any]]:
    exit_code = 0 if all(o == "passed" for o in outcomes.values()) else 1
    normalized = normalize_report(_report(outcomes), exit_code, "")
    floor = floor or _floor()
    return grade(normalized, exit_code, len(BASE), floor), identity_record(normalized, floor)


def _score(graded: Any) -> tuple[bool, int, int | None, float]:
    return graded.final_success, graded.passed, graded.denominator, graded.pass_rate


HONEST_BASE = _graded(BASE)[0]


def test_gold_and_base_score_as_before() -> None:
    graded, record = _graded(GOLD)
    assert _score(graded) == (True, 25, 25, 1.0) and graded.total_source == "report_total"
    assert record == {"checked": True, "missing_count": 0, "missing": [], "added_count": 0}
    assert _score(HONEST_BASE) == (False, 7, 25, 7 / 25)


def test_the_count_keeping_swap_scores_as_if_the_dropped_tests_failed() -> None:
    """18 failing tests dropped, 18 new passing ones added: the count rule is kept, the identity rule is not."""
    swapped = {**dict.fromkeys(PASSING, "passed"), **{f"t.py::test_new{i}": "passed" for i in range(18)}}
    graded, record = _graded(swapped)
    assert _score(graded) == _score(HONEST_BASE)
    assert graded.outcome == "model_failure:integrity_collection_shrunk"
    assert (record["missing_count"], record["added_count"]) == (18, 18)
    assert record["missing"] == sorted(FAILING)


def test_renamed_failing_tests_score_as_failed() -> None:
    renamed = {**dict.fromkeys(PASSING, "passed"), **{n.replace("test_", "test_renamed_"): "passed" for n in FAILING}}
    assert _score(_graded(renamed)[0]) == _score(HONEST_BASE)


def test_a_parametrization_that_changes_ids_scores_as_if_they_failed() -> None:
    """The six `test_g[i]` cases become two with other ids, and the bracketed and unicode ids are matched exactly:
    `test_param[b-[x]]` passing as `test_param[b-[X]]`, or `test_caf\\xe9` as `test_café`, is another test."""
    changed = {**{n: o for n, o in BASE.items() if not n.startswith("u.py::test_g[")},
               "u.py::test_g[first]": "passed", "u.py::test_g[second]": "passed"}
    graded, record = _graded(changed)
    assert _score(graded) == _score(HONEST_BASE) and record["missing_count"] == 6
    lookalikes = {**{n: "passed" for n in PASSING if n not in ("t.py::test_param[b-[x]]", "t.py::test_caf\\xe9")},
                  "t.py::test_param[b-[X]]": "passed", "t.py::test_café": "passed",
                  **dict.fromkeys(FAILING, "failed")}
    graded, record = _graded(lookalikes)
    assert (graded.passed, graded.final_success, record["missing"]) == (
        5, False, sorted(["t.py::test_param[b-[x]]", "t.py::test_caf\\xe9"]))


def test_a_test_file_dropped_from_collection_scores_as_if_its_tests_failed() -> None:
    dropped = {n: o for n, o in GOLD.items() if not n.startswith("u.py::")}
    graded, record = _graded(dropped)
    assert (graded.final_success, graded.passed, graded.denominator) == (False, 17, 25)
    assert record["missing_count"] == 8


def test_tests_the_patch_adds_never_count() -> None:
    """Added passing tests raise neither the numerator nor the denominator."""
    added = {**BASE, **{f"v.py::test_extra{i}": "passed" for i in range(40)}}
    graded, record = _graded(added)
    assert _score(graded) == _score(HONEST_BASE) and record["added_count"] == 40
    gold_plus = {**GOLD, "v.py::test_extra": "passed"}
    assert _score(_graded(gold_plus)[0]) == (True, 25, 25, 1.0)


def test_a_duplicated_node_id_cannot_hide_a_failure() -> None:
    report = _report(GOLD)
    report["tests"] = [{"nodeid": FAILING[0], "outcome": "failed"}] + report["tests"]
    normalized = normalize_report(report, 1, "")
    assert normalized.outcomes is not None and normalized.outcomes[FAILING[0]] == "failed"
    assert grade(normalized, 1, 25, _floor()).passed == 24


def test_base_records_without_ids_keep_the_count_rules() -> None:
    """The fallback for records made before decision 14: the run's own counts, as before (recorded unchecked)."""
    swapped = {**dict.fromkeys(PASSING, "passed"), **{f"t.py::test_new{i}": "passed" for i in range(18)}}
    graded, record = _graded(swapped, _floor(with_ids=False))
    assert _score(graded) == (True, 25, 25, 1.0)
    assert record == {"checked": False, "missing_count": 0, "missing": [], "added_count": 0}


# --- probe selectors ----------------------------------------------------------------------------------------------

def _tests(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"nodeid": n, "outcome": o} for n, o in pairs]


def test_a_selector_is_scored_on_the_tests_the_base_collected_for_it() -> None:
    base_ids = frozenset({"u.py::test_g[0]", "u.py::test_g[1]"})
    honest = selector_status("u.py::test_g", _tests(("u.py::test_g[0]", "passed"), ("u.py::test_g[1]", "passed")),
                             0, False, base_ids)
    assert (honest.status, honest.passed) == ("passed", True)
    new_ids = selector_status("u.py::test_g", _tests(("u.py::test_g[other]", "passed")), 0, False, base_ids)
    assert (new_ids.status, new_ids.passed) == ("not_collected", False)
    one_left = selector_status("u.py::test_g", _tests(("u.py::test_g[0]", "passed"), ("u.py::test_g[9]", "passed")),
                               0, False, base_ids)
    assert (one_left.status, one_left.passed) == ("failed", False)
    assert [n.nodeid for n in one_left.matched] == ["u.py::test_g[0]"]  # the added id is not the selector's
    # Without base ids (the base collected nothing for the selector, or an old record): matching, as before.
    assert selector_status("u.py::test_g", _tests(("u.py::test_g[other]", "passed")), 0, False).passed


def test_selector_results_read_the_base_ids_per_selector() -> None:
    call = ProbeCall(("a.py::test_a", "b.py::test_b"), 0, False,
                     tuple(_tests(("a.py::test_a[new]", "passed"), ("b.py::test_b", "passed"))), True, "")
    run = ProbeRun("batch", (call,), 60)
    results = selector_results(run, ("a.py::test_a", "b.py::test_b"),
                               {"a.py::test_a": frozenset({"a.py::test_a[old]"})})
    assert (results["a.py::test_a"].passed, results["b.py::test_b"].passed) == (False, True)


# --- the base-state record ----------------------------------------------------------------------------------------

class _FakeRun:
    def __init__(self, report: dict[str, Any]) -> None:
        self.report, self.exit_code, self.tail, self.report_problem, self.sentinel = report, 1, "", None, None
        self.output_capped = False


class _FakeBench:
    """Enough of a Workbench for `baseline.measure`: a fixed evaluator report and a fixed probe run."""

    def __init__(self, report: dict[str, Any], probes: ProbeRun | None) -> None:
        self.spec = SimpleNamespace(task_id="asyncodebench-demo:x", pinned_ref="img@sha256:0", initial_counts=(),
                                    selectors=("u.py::test_g", "u.py::test_none"))
        self.settings = SimpleNamespace(run_probes=probes is not None)
        self._run, self._probes = _FakeRun(report), probes

    @contextmanager
    def built(self, patch: bytes) -> Iterator[None]:
        yield None

    def evaluate(self, patch: bytes, built: None = None) -> tuple[None, _FakeRun]:
        return None, self._run

    def probe(self, patch: bytes, built: None = None) -> tuple[None, ProbeRun | None]:
        assert patch == b""
        return None, self._probes


def test_the_base_record_keeps_collected_and_selector_ids_and_reads_old_records() -> None:
    call = ProbeCall(("u.py::test_g", "u.py::test_none"), 1, False,
                     tuple(_tests(("u.py::test_g[0]", "failed"), ("u.py::test_g[1]", "failed"))), True, "")
    record = baseline.measure(_FakeBench(_report(BASE), ProbeRun("batch", (call,), 60)))
    assert record.collected_ids == tuple(sorted(BASE))
    assert record.selector_ids == {"u.py::test_g": ("u.py::test_g[0]", "u.py::test_g[1]")}  # none for test_none
    assert baseline.BaseStateRecord.from_json(record.to_json()) == record
    floor = record.floor(SimpleNamespace(initial_counts=()))
    assert floor is not None and floor.collected_ids == frozenset(BASE)
    assert floor.selector_ids == {"u.py::test_g": frozenset({"u.py::test_g[0]", "u.py::test_g[1]"})}
    old = {k: v for k, v in record.to_json().items() if k not in ("collected_ids", "selector_ids")}
    old_floor = baseline.BaseStateRecord.from_json(old).floor(SimpleNamespace(initial_counts=()))
    assert old_floor is not None and (old_floor.collected_ids, old_floor.selector_ids) == (None, None)
    no_probes = baseline.measure(_FakeBench(_report(BASE), None))
    assert no_probes.selector_ids is None and no_probes.collected_ids == tuple(sorted(BASE))


def test_tests_of_a_module_the_base_could_not_collect_are_scored() -> None:
    """A test module that fails to import at base lists no test there, only its failed collector; the tests a
    working implementation lets pytest list in it are the task's own (the file is restored from the base), so they
    count. New ids anywhere else still do not."""
    floor = Baseline(0, 8, "base_run", frozenset(), frozenset(PASSING), failed_collectors=frozenset({"w.py"}))
    evaluated = {**dict.fromkeys(PASSING, "passed"), "w.py::test_w1": "passed", "w.py::test_w2": "failed",
                 "w.pyx::test_lookalike": "passed", "x.py::test_new": "passed"}
    normalized = normalize_report(_report(evaluated), 1, "")
    graded = grade(normalized, 1, None, floor)
    assert (graded.passed, graded.denominator) == (8, 9)
    assert identity_record(normalized, floor)["added_count"] == 2
