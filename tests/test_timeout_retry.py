"""A process that hits its wall-clock limit runs once more with twice the limit, and that run stands (METRICS
decision 16; harness/retry.py). No Docker here: the decision, the retry around stand-in containers, and what the
result records. tests/test_timeout_retry_containers.py does it on real containers."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers.tampering_reports import REAL, TOKEN
from helpers.tampering_reports import report_of as _report
from helpers.tampering_reports import terminal_line as _line

from asyncodebench.dataset.validation import validator
from asyncodebench.harness import evaluation
from asyncodebench.harness.evaluation import Settings, Workbench, evidence_from
from asyncodebench.harness.native import BuildRun
from asyncodebench.harness.probes import ProbeRun, _call
from asyncodebench.harness.retry import next_limit
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.harness.workspace import Preparation, PytestRun
from asyncodebench.run.prediction_result import PredictionResult
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score
from asyncodebench.run.store import load_evidence, save_evidence


@pytest.mark.parametrize("timed_out,ambiguous,retry_timeout,expected", [
    (False, False, True, None),  # an honest run that ended by itself stands: no extra cost
    (True, False, True, 120),  # a timeout: once more, with twice the limit
    (True, True, True, 120),  # stopped while printing its summary: a timeout first
    (False, True, True, 60),  # ambiguous evidence only (decision 15): the same limit
    (True, False, False, None),  # a probe batch: its selectors run alone instead
    (True, True, False, 60),
])
def test_the_retry_decision(timed_out: bool, ambiguous: bool, retry_timeout: bool, expected: int | None) -> None:
    assert next_limit(60, timed_out, ambiguous, retry_timeout) == expected


def test_a_timeout_is_read_against_the_limit_of_its_own_run() -> None:
    """An OOM kill (137) after the first limit but before the doubled one is not a timeout of the second run."""
    assert PytestRun(124, 60.0, False, "", None, "missing", "c", limits=(60,)).timed_out
    assert PytestRun(137, 61.0, False, "", None, "missing", "c", limits=(60,)).timed_out
    assert not PytestRun(137, 61.0, False, "", None, "missing", "c", limits=(60, 120)).timed_out
    assert PytestRun(None, 150.0, True, "", None, "missing", "c", limits=(60, 120)).timed_out  # the watchdog
    assert not PytestRun(1, 59.0, False, "", None, None, "c", limits=(60,)).timed_out
    call = _call(("tests/test_a.py",), PytestRun(137, 61.0, False, "", None, "missing", "c", limits=(60, 120)), 60)
    assert call.timed_out is False and call.limits == (60, 120)


class _Bench(Workbench):
    """A workbench whose containers are stand-ins: only the retry around them is real."""

    @contextmanager
    def prepared(self, patch: bytes, build_tree: Any = None, for_build: bool = False
                 ) -> Iterator[tuple[Any, Preparation]]:
        yield None, Preparation("applied", "", (), "ref", (), (), (), ())


HONEST = "honest"
HANGS = "hangs"


def _bench(monkeypatch: pytest.MonkeyPatch, behaviours: list[str]) -> tuple[_Bench, list[int]]:
    """A workbench whose pytest runs follow `behaviours` in order; returns the limits each run was given."""
    given = iter(behaviours)
    limits: list[int] = []

    def fake_run(box: Any, workdir: str, interpreter: str, plugins: Any, args: Any, seconds: int,
                 near: str = "") -> PytestRun:
        limits.append(seconds)
        if next(given) == HANGS:  # `timeout` stopped it at its limit: exit 124, no report
            return PytestRun(124, float(seconds), False, "....", None, "missing", "c", TOKEN, limits=(seconds,))
        report = json.loads(json.dumps(_report(REAL)))
        return PytestRun(1, 1.0, False, _line(report), report, None, "c", TOKEN, limits=(seconds,))

    monkeypatch.setattr(evaluation, "run_pytest", fake_run)
    spec = type("Spec", (), {"workdir": "/testbed", "interpreter": "python"})()
    return _Bench(None, spec, "run", Settings(), (), "base"), limits  # type: ignore[arg-type]


@pytest.mark.parametrize("behaviours,limits,timed_out", [
    ([HONEST], [60], False),
    ([HANGS, HONEST], [60, 120], False),  # load slowed the first past its limit: the second's verdict stands
    ([HANGS, HANGS], [60, 120], True),  # never ends, even under twice the limit: a timeout, the model's
])
def test_a_process_that_times_out_runs_once_more_with_twice_the_limit(
        monkeypatch: pytest.MonkeyPatch, behaviours: list[str], limits: list[int], timed_out: bool) -> None:
    bench, given = _bench(monkeypatch, behaviours)
    preparations: list[Preparation] = []
    _, run = bench.pytest(b"", None, ("tests",), 60, "tests", preparations)
    assert run is not None and given == limits and len(preparations) == len(limits)  # a fresh container each time
    assert (run.attempts, run.limits, run.timed_out) == (len(limits), tuple(limits), timed_out)
    assert (run.report is None) is timed_out


def test_a_probe_batch_that_times_out_is_not_retried_its_selectors_run_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    bench, given = _bench(monkeypatch, [HANGS])
    _, run = bench.pytest(b"", None, ("a", "b"), 60, "a", retry_timeout=False)
    assert run is not None and given == [60] and (run.attempts, run.timed_out) == (1, True)


def _spec(offline_demo_dataset: Path) -> TaskSpec:
    from asyncodebench.dataset.rows import load_published

    rows = load_published(str(offline_demo_dataset)).rows
    return TaskSpec.from_rows(rows.tasks[0], rows.dependencies)


def test_the_result_records_each_run_and_its_limit(offline_demo_dataset: Path, tmp_path: Path) -> None:
    spec = _spec(offline_demo_dataset)
    preparation = Preparation("applied", "", (), spec.base_revision, (), (), (), ("minicache/core.py",), ())
    hung = PytestRun(124, 40.0, False, "....", None, "missing", "c", TOKEN, attempts=2, limits=(20, 40))
    probe = _call(tuple(spec.selectors[:1]), replace(hung, limits=(10, 20)), 10)
    evidence = evidence_from(spec, preparation, hung, ProbeRun("per_selector", (probe,), 10), Settings(timeout=20))
    assert (evidence.timed_out, evidence.attempts, evidence.limits) == (True, 2, (20, 40))
    save_evidence(tmp_path, evidence)
    assert load_evidence(tmp_path) == evidence  # attempts and limits survive the saved evidence
    result = score(spec, Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {}), evidence,
                   recorded_at="t")
    record = result.to_json()
    assert not list(validator("result").iter_errors(record))
    assert (record["evaluator"]["attempts"], record["evaluator"]["limits_seconds"]) == (2, [20, 40])
    assert record["outcome"] == "model_failure:timeout" and record["pass_rate"] == 0.0  # as before the retry
    assert record["probes"]["retried"] == [{"step": 1, "selectors": list(spec.selectors[:1]), "attempts": 2,
                                            "limits_seconds": [10, 20], "timed_out": True}]
    assert PredictionResult.from_json(record, result.checkpoints) == result


def test_a_build_that_timed_out_twice_is_build_failed_with_both_runs_recorded(offline_demo_dataset: Path) -> None:
    from asyncodebench.dataset.native_builds import native_builds

    spec = replace(_spec(offline_demo_dataset), build=native_builds()["asyncodebench-demo:vecstats"])
    preparation = Preparation("applied", "", (), spec.base_revision, (), (), (), ("src/x.cpp",), ())
    build = BuildRun(("make",), 124, 8.0, True, "", attempts=2, limits=(4, 8))
    evidence = replace(evidence_from(spec, preparation, None, None, Settings()), build=build)
    record = score(spec, Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {}), evidence,
                   recorded_at="t").to_json()
    assert not list(validator("result").iter_errors(record))
    assert record["outcome"] == "model_failure:build_failed"  # as before the retry: the model's outcome
    final = record["build"]["final"]
    assert (final["status"], final["attempts"], final["limits_seconds"]) == ("timed_out", 2, [4, 8])
    assert record["build"]["states"] == [{"step": 1, "status": "timed_out", "seconds": 8.0, "attempts": 2}]
    assert BuildRun.from_json(final) == build


def test_records_from_before_the_retry_still_read(offline_demo_dataset: Path) -> None:
    build = BuildRun(("make",), 0, 1.0, False, "ok")
    old = {k: v for k, v in build.to_json().items() if k not in ("attempts", "limits_seconds")}
    assert BuildRun.from_json(old) == build
    spec = _spec(offline_demo_dataset)
    preparation = Preparation("applied", "", (), spec.base_revision, (), (), (), (), ())
    evidence = evidence_from(spec, preparation, None, None, Settings())
    record = score(spec, Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {}), evidence,
                   recorded_at="t").to_json()
    for key in ("attempts", "limits_seconds"):
        record["evaluator"].pop(key)
    record["probes"].pop("retried")
    assert not list(validator("result").iter_errors(record))
    evaluator = PredictionResult.from_json(record, []).evaluation.evaluator  # type: ignore[union-attr]
    assert (evaluator.attempts, evaluator.limits_seconds) == (1, ())
