"""A pytest process whose own evidence contradicts itself is caught (scoring/tampering.py, METRICS decision 11).

Pure checks over reports shaped as pytest-json-report writes them, with the terminal line pytest prints; the same
forms are run for real in tests/test_hostile_grading.py.
"""

from __future__ import annotations

from helpers.tampering_reports import REAL, SENTINELS, TOKEN
from helpers.tampering_reports import report_of as _report
from helpers.tampering_reports import terminal_line as _line

from asyncodebench.harness.checks import examine_probes
from asyncodebench.harness.probes import ProbeCall, ProbeRun
from asyncodebench.scoring.tampering import examine, terminal_counts

ALL_PASS = {nodeid: "passed" for nodeid in REAL}


def test_an_honest_run_agrees_and_loses_its_sentinels() -> None:
    report = _report(REAL)
    check = examine(report, 1, _line(report), TOKEN)
    assert check.tampering == ()
    assert [t["nodeid"] for t in check.report["tests"]] == list(REAL)
    assert check.report["summary"] == {"passed": 2, "failed": 1, "error": 0, "skipped": 0, "total": 3,
                                       "collected": 3}
    assert check.exit_code == 1  # a real test failed


def test_an_honest_run_with_every_test_passing_gets_exit_code_0() -> None:
    report = _report(ALL_PASS)
    check = examine(report, 1, _line(report), TOKEN)
    assert (check.tampering, check.exit_code) == ((), 0)


def test_outcomes_forced_to_passed_show_in_the_sentinels() -> None:
    forced = _report(ALL_PASS, sentinels={"passed": "passed", "failed": "passed", "error": "passed",
                                          "skipped": "passed"})
    check = examine(forced, 0, _line(forced), TOKEN)
    assert "the sentinel that must be failed is passed" in check.tampering
    assert "the sentinel that must be error is passed" in check.tampering
    assert check.exit_code == 0  # not turned into a success: tampering zeroes the score (results.score)


def test_missing_sentinels_are_tampering_only_when_the_run_went_to_its_end() -> None:
    report = _report(ALL_PASS, sentinels={})
    assert "the sentinel that must be failed is missing" in examine(report, 0, _line(report), TOKEN).tampering
    interrupted = examine(report, 2, _line(report), TOKEN)  # pytest stopped early (KeyboardInterrupt, exit())
    assert not any("missing" in reason for reason in interrupted.tampering)


def test_a_forged_summary_disagrees_with_its_own_tests() -> None:
    report = _report(REAL)
    report["summary"].update(passed=27, failed=1)
    report["summary"].pop("error")
    check = examine(report, 1, "1 failed, 27 passed in 0.01s\n", TOKEN)
    assert any("disagrees with its own list of tests" in reason for reason in check.tampering)


def test_a_report_of_results_without_pytests_summary_line_is_tampering() -> None:
    """When the process's own output pushed pytest's line out of the kept tail; without that, the line may have
    been lost by the output stream of a loaded machine: ambiguous (tests/test_load_ambiguity.py)."""
    report = _report(REAL)
    assert examine(report, 1, "y" * 1000, TOKEN, output_capped=True).tampering == (
        "the report lists tests but pytest printed no summary line",)


def test_a_rewritten_report_disagrees_with_the_terminal_line() -> None:
    honest = _report(REAL)
    rewritten = _report(ALL_PASS, sentinels={"passed": "passed", "failed": "failed", "error": "error",
                                             "skipped": "skipped"})
    check = examine(rewritten, 1, _line(honest), TOKEN)
    assert any("terminal summary" in reason for reason in check.tampering)


def test_the_last_summary_line_counts_and_colours_are_ignored() -> None:
    output = ("3 passed in 0.1s\nnoise\n\x1b[31m= \x1b[1m2 failed\x1b[0m, 5 passed, 1 error, 3 warnings in "
              "0.31s (0:00:00) =\x1b[0m\n")
    counts = terminal_counts(output)
    assert counts is not None and (counts["failed"], counts["passed"], counts["error"]) == (2, 5, 1)
    assert terminal_counts("no tests ran in 0.01s") == dict.fromkeys(
        ("passed", "failed", "error", "skipped", "xfailed", "xpassed"), 0)
    assert terminal_counts("nothing here") is None


def test_exit_code_0_with_failures_in_the_report_is_tampering() -> None:
    report = _report(REAL)
    assert "exit code 0 with 3 failure(s) in the report" in examine(report, 0, _line(report), TOKEN).tampering


def test_collection_errors_count_with_pytests_errors() -> None:
    report = _report(ALL_PASS)
    report["collectors"] = [{"nodeid": "tests/test_c.py", "outcome": "failed"}]
    line = "1 failed, 4 passed, 1 skipped, 2 errors in 0.1s"
    check = examine(report, 1, line, TOKEN)
    assert check.tampering == () and check.exit_code == 1


def test_a_test_ended_by_keyboard_interrupt_is_not_counted_twice() -> None:
    report = _report({"tests/test_a.py::test_one": "passed"})
    report["tests"].append({"nodeid": "tests/test_a.py::test_stopped", "outcome": "passed", "setup": {}})
    report["summary"]["passed"] += 1
    report["summary"]["total"] += 1
    check = examine(report, 2, "1 failed, 2 passed, 1 skipped, 1 error in 0.1s\n!!! KeyboardInterrupt !!!", TOKEN)
    assert check.tampering == ()


def test_evidence_without_a_secret_or_a_readable_report_is_left_as_it_is() -> None:
    report = _report(REAL)
    assert examine(report, 1, "", None).report is report
    assert examine({}, 1, "", TOKEN).tampering == () and examine(None, None, "", TOKEN).report is None


def test_garbage_in_the_report_is_tampering_not_a_crash() -> None:
    assert examine({"summary": {"passed": 3}, "tests": "lots"}, 0, "", TOKEN).tampering
    assert examine({"summary": {"passed": 3}, "tests": [1, 2]}, 0, "", TOKEN).tampering
    odd = _report(REAL)
    odd["summary"]["passed"] = "many"
    assert examine(odd, 1, _line(_report(REAL)), TOKEN).tampering


def test_probe_processes_that_contradict_themselves_pass_no_selector() -> None:
    honest, forced = _report(REAL), _report(ALL_PASS, sentinels={o: "passed" for o in SENTINELS})
    calls = tuple(
        ProbeCall(("tests/test_a.py",), 1, False, tuple({"nodeid": t["nodeid"], "outcome": t["outcome"]}
                                                        for t in r["tests"]), True, _line(r), r["summary"], 0, TOKEN)
        for r in (honest, forced))
    run, found = examine_probes(ProbeRun("batch", calls, 10), "final state")
    assert [t["outcome"] for t in run.calls[0].tests] == ["passed", "passed", "failed"]
    assert {t["outcome"] for t in run.calls[1].tests} == {"tampered"}
    assert found and all(f["process"].startswith("final state probes") for f in found)


def test_a_failing_teardown_after_a_call_is_counted_as_pytest_counts_it() -> None:
    """pytest's line counts the call's outcome and the teardown's error; the report lists the test once, as an
    error (an honest fixture whose clean-up fails, as flask's reference state has 13 of)."""
    report = _report({"tests/test_a.py::test_one": "passed"})
    for nodeid, call in (("tests/test_a.py::test_td_passed", "passed"), ("tests/test_a.py::test_td_failed", "failed")):
        report["tests"].append({"nodeid": nodeid, "outcome": "error", "setup": {"outcome": "passed"},
                                "call": {"outcome": call}, "teardown": {"outcome": "failed"}})
    report["summary"]["error"] += 2
    report["summary"]["total"] += 2
    line = "2 failed, 3 passed, 1 skipped, 3 errors in 0.1s"
    assert examine(report, 1, line, TOKEN).tampering == ()
    reduced = [{"nodeid": t["nodeid"], "outcome": t["outcome"],
                **({"stages": {s: t[s]["outcome"] for s in ("setup", "call", "teardown")}} if "teardown" in t else {})}
               for t in report["tests"]]
    call = ProbeCall(("tests/test_a.py",), 1, False, tuple(reduced), True, line, report["summary"], 0, TOKEN)
    assert examine_probes(ProbeRun("batch", (call,), 10), "final state")[1] == []
