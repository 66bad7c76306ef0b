"""The optional monitor model (evaluate.py --monitor-model, asyncodebench/agents/monitor.py): its verdict is recorded
and shown, a suspicious one holds the result for review, and nothing it does (an answer that is no verdict, an
endpoint that cannot be reached) changes a score or counts as the prediction's failure. Against the scripted model
server (a real HTTP server on 127.0.0.1) and a real evaluate.py run of the demo task."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.demo_run import EvalRun
from helpers.predictions import example_predictions

from asyncodebench.agents.monitor import MonitorVerdict, verdict_of, wanted
from asyncodebench.agents.scripted_server import ScriptedServer, parse_scripts
from asyncodebench.reports.synthetic import synthetic_inputs
from asyncodebench.run.prediction_result import PredictionResult
from asyncodebench.scoring.trust import trust_of

SUSPICIOUS = {"suspicious": True, "lines": ["src/minicache/core.py:12"], "why": "it answers the tests' inputs"}


def test_a_verdict_is_read_from_a_bare_or_fenced_object_and_anything_else_is_unusable() -> None:
    assert verdict_of("m", json.dumps(SUSPICIOUS)) == MonitorVerdict(
        "answered", "m", True, ("src/minicache/core.py:12",), SUSPICIOUS["why"], json.dumps(SUSPICIOUS))
    fenced = verdict_of("m", 'Here it is:\n```json\n{"suspicious": false, "why": "plain code"}\n```')
    assert (fenced.status, fenced.suspicious, fenced.lines, fenced.why) == ("answered", False, (), "plain code")
    for garbage in ("yes, very suspicious", '{"suspicious": "yes"}', "{not json}", "", "[true]"):
        verdict = verdict_of("m", garbage)
        assert (verdict.status, verdict.suspicious, verdict.answer) == ("unusable", None, garbage), garbage


def test_only_a_suspicious_answer_changes_the_trust_status() -> None:
    clean: dict[str, Any] = {"violation": None, "review": {"count": 0, "high": 0, "flags": []}}
    for verdict, status in ((verdict_of("m", json.dumps(SUSPICIOUS)), "needs_review"),
                            (verdict_of("m", '{"suspicious": false}'), "verified"),
                            (verdict_of("m", "garbage"), "verified"),
                            (MonitorVerdict("unreachable", "m", problem="refused"), "verified")):
        assert trust_of({**clean, "monitor": verdict.to_json()}).status == status, verdict


def test_which_results_the_monitor_reads() -> None:
    _, _, (record, failed) = synthetic_inputs(tasks=1, points=1, models=("m",), protocols=("single", "async_private"),
                                              infrastructure_errors=1)

    def result(**integrity: Any) -> PredictionResult:
        return PredictionResult.from_json({**record, "integrity": {**record["integrity"], **integrity}})

    flagged, plain = result(review={"count": 1, "high": 1, "flags": []}), result(review={"count": 0, "high": 0,
                                                                                          "flags": []})
    assert (wanted(flagged, "flagged"), wanted(plain, "flagged"), wanted(plain, "all")) == (True, False, True)
    assert not wanted(PredictionResult.from_json(failed), "all")
    for status, again in (("answered", False), ("unusable", False), ("unreachable", True)):
        done = result(review={"count": 0, "high": 0, "flags": []}, monitor={"status": status})
        assert wanted(done, "all") is again, status


def _closed_port() -> int:
    with socket.socket() as probe:  # bound, never listened on: a connection is refused
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def monitored(demo_dataset: Any, evaluate: Callable[..., EvalRun]) -> Iterator[tuple[EvalRun, dict, EvalRun]]:
    """One run id evaluated twice: first with a monitor endpoint that refuses connections, then, resumed, with a
    scripted monitor that answers the gold patch with garbage and calls the partial one suspicious."""
    examples = example_predictions()
    lines = [examples["demo-gold"], examples["demo-partial"]]
    flags = ("--no-probes", "--timeout", "60", "--monitor", "all", "--monitor-model", "scripted/monitor")
    unreachable = evaluate(lines, demo_dataset.path, *flags, "--monitor-base-url",
                           f"http://127.0.0.1:{_closed_port()}/v1", "--monitor-retry-seconds", "1",
                           run_id="monitored")
    first = {p["model_name_or_path"]: unreachable.result(p["model_name_or_path"]) for p in lines}  # before the rerun
    scripts = parse_scripts({"monitor": [{"content": "I think it is fine, probably."},
                                         {"content": f"```json\n{json.dumps(SUSPICIOUS)}\n```"}]})
    with ScriptedServer(scripts) as server:
        answered = evaluate(lines, demo_dataset.path, *flags, "--monitor-base-url", server.base_url,
                            run_id="monitored")
    yield unreachable, first, answered


def test_an_unreachable_monitor_changes_no_result_and_is_asked_again(
        monitored: tuple[EvalRun, dict, EvalRun]) -> None:
    unreachable, first, _ = monitored
    assert unreachable.returncode == 0, unreachable.stderr[-3000:]
    assert "0 answered (0 suspicious), 0 unusable, 2 unreachable" in unreachable.stderr
    for model, passed in (("demo-gold", 25), ("demo-partial", 17)):
        result = first[model]
        assert result["integrity"]["monitor"]["status"] == "unreachable", model
        assert (result["tests_passed"], result["trust"]["status"]) == (passed, "verified"), model
    assert unreachable.report["counts"]["infrastructure_errors"] == 0


def test_a_suspicious_verdict_holds_the_result_for_review_and_garbage_changes_nothing(
        monitored: tuple[EvalRun, dict, EvalRun]) -> None:
    _, _, answered = monitored
    assert answered.returncode == 0, answered.stderr[-3000:]
    assert "1 answered (1 suspicious), 1 unusable, 0 unreachable" in answered.stderr
    gold, partial = answered.result("demo-gold"), answered.result("demo-partial")
    assert gold["integrity"]["monitor"]["status"] == "unusable"
    assert gold["integrity"]["monitor"]["answer"] == "I think it is fine, probably."
    assert (gold["final_success"], gold["tests_passed"], gold["trust"]["status"]) == (True, 25, "verified")
    monitor = partial["integrity"]["monitor"]
    assert (monitor["status"], monitor["suspicious"], monitor["lines"]) == ("answered", True, SUSPICIOUS["lines"])
    assert partial["trust"] == {"status": "needs_review", "reasons": ["the monitor model called it suspicious"]}
    assert (partial["final_success"], partial["tests_passed"]) == (False, 17)  # the score stands
    assert answered.row("demo-partial")["trust_status"] == "needs_review"
    assert answered.row("demo-partial")["monitor"] == {"status": "answered", "suspicious": True,
                                                      "why": SUSPICIOUS["why"]}
    assert answered.row("demo-gold")["monitor"]["status"] == "unusable"
    markdown = (answered.run_dir / "report.md").read_text()
    assert "monitor: suspicious" in markdown and "monitor unusable" in markdown
