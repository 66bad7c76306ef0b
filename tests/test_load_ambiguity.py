"""What a loaded machine can do to honest evidence is never tampering (scoring/tampering.py): a summary line lost at
the end of the output stream, or a process stopped before its session ended, is run once more and, if it
persists, listed under `integrity.needs_review` with the score its evidence gives. Contradictions load cannot
produce stay tampering. No Docker here; tests/test_load_verdicts.py runs honest predictions beside a CPU hog."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

import pytest
from helpers.tampering_reports import REAL, TOKEN
from helpers.tampering_reports import report_of as _report
from helpers.tampering_reports import terminal_line as _line

from asyncodebench.harness import evaluation
from asyncodebench.harness.checks import evidence_needs_review, examine_evidence
from asyncodebench.harness.evaluation import Evidence, Settings, Workbench
from asyncodebench.harness.probes import ProbeCall, ProbeRun, _call
from asyncodebench.harness.workspace import Preparation, PytestRun
from asyncodebench.scoring.tampering import LOST_SUMMARY_LINE, NO_SUMMARY_LINE, examine

SWARM_REPORT = {"summary": {"passed": 25, "total": 25, "collected": 25}, "tests": []}


def test_a_summary_line_lost_from_an_uncapped_output_is_ambiguous_and_the_report_stands() -> None:
    report = _report(REAL)
    check = examine(report, 1, "....F.s.E\n", TOKEN)
    assert (check.tampering, check.ambiguous) == ((), (LOST_SUMMARY_LINE,))
    assert check.report is not None and len(check.report["tests"]) == len(REAL)  # scored as pytest left it
    pushed_out = examine(report, 1, "....F.s.E\n" + "y" * 100, TOKEN, output_capped=True)
    assert (pushed_out.tampering, pushed_out.ambiguous) == ((NO_SUMMARY_LINE,), ())


def test_a_summary_line_cut_at_the_end_of_the_output_is_ambiguous() -> None:
    """`1 failed, 2 pas`: the stream lost the rest of pytest's line; read as counts it would disagree."""
    report = _report(REAL)
    whole = _line(report)
    for cut in (whole.rstrip("\n")[:-12], whole.split(" in ")[0].rsplit(" ", 1)[0]):
        check = examine(report, 1, cut, TOKEN)
        assert (check.tampering, check.ambiguous) == ((), (LOST_SUMMARY_LINE,)), cut
    assert examine(report, 1, whole, TOKEN) == examine(report, 1, whole, TOKEN, output_capped=True)
    assert examine(report, 1, whole, TOKEN).tampering == examine(report, 1, whole, TOKEN).ambiguous == ()


def test_a_process_stopped_before_its_end_is_not_read_when_its_report_disagrees() -> None:
    """The re-forking swarm's report after a timeout that stopped the launcher before its kill(-1): not the
    session's verdict, so not read (nothing is credited from it), and not tampering either."""
    for exit_code in (124, 137, None, 7):
        check = examine(SWARM_REPORT, exit_code, "", TOKEN)
        assert check.report is None and check.tampering == (), exit_code
        assert len(check.ambiguous) == 1 and "stopped before its session ended" in check.ambiguous[0], exit_code
        assert "disagrees with its own list of tests" in check.ambiguous[0]
    assert examine(SWARM_REPORT, 1, "", TOKEN).tampering  # a process that went to its end: tampering, as ever
    honest_timeout = examine(_report(REAL), 124, _line(_report(REAL)), TOKEN)
    assert honest_timeout.report is not None and honest_timeout.ambiguous == honest_timeout.tampering == ()


def test_a_timeout_while_pytest_prints_its_terminal_summary_keeps_pytests_own_report() -> None:
    """pytest writes its report, then prints every failure's traceback and only then its summary line: a timeout
    in between (seconds on a loaded host) leaves a true report without the line. It is read, and listed."""
    check = examine(_report(REAL), 124, "....F.s.E\n=== FAILURES ===\n___ test_three ___\n    assert 0\n", TOKEN)
    assert check.tampering == () and check.ambiguous == (LOST_SUMMARY_LINE,)
    assert check.report is not None and len(check.report["tests"]) == len(REAL)


def _evidence(report: dict[str, Any] | None, exit_code: int | None, output: str, probes: ProbeRun | None = None,
              attempts: int = 1) -> Evidence:
    prep = Preparation("applied", "", (), "ref", (), (), (), ())
    return Evidence(prep, exit_code, exit_code == 124, False, 1.0, output, report, probes, "c", ("pytest",),
                    sentinel=TOKEN, attempts=attempts)


def test_the_evidence_lists_the_ambiguous_processes_for_review_never_as_tampering() -> None:
    lost = ProbeCall(("tests/test_a.py",), 1, False, tuple(_report(REAL)["tests"]), True, "....F\n",
                     _report(REAL)["summary"], 0, TOKEN, attempts=2)
    swarm = ProbeCall(("tests/test_b.py",), 124, True, (), True, "", SWARM_REPORT["summary"], 0, TOKEN)
    evidence = _evidence(_report(REAL), 1, "....F.s.E\n", ProbeRun("batch+per_selector", (lost, swarm), 60),
                         attempts=2)
    review = evidence_needs_review(evidence)
    assert [r["process"] for r in review] == ["evaluator", "final state probes tests/test_a.py",
                                              "final state probes tests/test_b.py"]
    assert review[0]["reason"] == f"{LOST_SUMMARY_LINE} (in each of 2 runs)"
    clean, tampering = examine_evidence(evidence)
    assert tampering == []
    assert clean.report is not None and clean.probes is not None
    assert [len(call.tests) for call in clean.probes.calls] == [len(REAL), 0]
    stopped, _ = examine_evidence(_evidence(SWARM_REPORT, 124, ""))
    assert (stopped.report, stopped.report_problem) == (None, "stopped_before_its_end")


def test_a_probe_call_knows_when_the_process_pushed_its_summary_line_out_of_the_kept_tail() -> None:
    run = PytestRun(1, 1.0, False, "", _report(REAL), None, "c", TOKEN)
    printed_after = replace(run, tail=_line(_report(REAL)) + "z" * 5000)
    assert _call(("s",), printed_after, 60).output_capped is True
    assert _call(("s",), replace(run, tail="....F\n" + "z" * 5000), 60).output_capped is False  # never printed
    assert _call(("s",), replace(run, tail=_line(_report(REAL))), 60).output_capped is False


class _Bench(Workbench):
    """A workbench whose containers are stand-ins: only the retry around them is real."""

    @contextmanager
    def prepared(self, patch: bytes, build_tree: Any = None, for_build: bool = False
                 ) -> Iterator[tuple[Any, Preparation]]:
        yield None, Preparation("applied", "", (), "ref", (), (), (), ())


@pytest.mark.parametrize("outputs,attempts", [(["....F\n", _line(_report(REAL))], 2),
                                              ([_line(_report(REAL))], 1),
                                              (["....F\n", "....F\n"], 2)])
def test_an_ambiguous_process_runs_once_more_in_a_new_container(monkeypatch: pytest.MonkeyPatch,
                                                                 outputs: list[str], attempts: int) -> None:
    given = iter(outputs)
    runs: list[str] = []

    def fake_run(box: Any, workdir: str, interpreter: str, plugins: Any, args: Any, seconds: int,
                 near: str = "") -> PytestRun:
        runs.append(next(given))
        return PytestRun(1, 1.0, False, runs[-1], json.loads(json.dumps(_report(REAL))), None, "c", TOKEN)

    monkeypatch.setattr(evaluation, "run_pytest", fake_run)
    spec = type("Spec", (), {"workdir": "/testbed", "interpreter": "python"})()
    bench = _Bench(None, spec, "run", Settings(), (), "base")  # type: ignore[arg-type]
    preparations: list[Preparation] = []
    _, run = bench.pytest(b"", None, ("tests",), 60, "tests", preparations)
    assert run is not None and (run.attempts, run.tail, len(runs), len(preparations)) == (
        attempts, outputs[-1], attempts, attempts)
