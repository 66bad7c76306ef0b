"""What evaluate.py checks of the agent runner's record of a line (`runner`), and how the runner keeps an invalid
scenario out of its predictions, without containers: the record's facts and notes, the infrastructure result of an
invalid line (its schema, read back), the run folder's invalid.json and the set-aside of an invalid attempt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncodebench
from asyncodebench.agents import runfolder
from asyncodebench.dataset.validation import validator
from asyncodebench.run.prediction_result import PredictionResult, RunnerFacts
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import invalid_run_result, runner_notes

SCENARIO = "asyncodebench-demo:minicache/single"


def record(valid: bool = True, source: str = "scenario row (subagent_max_iterations)", kit: str | None = None
           ) -> dict[str, Any]:
    invalid = [] if valid else [{"agent_id": "single_agent", "termination_reason": "provider_or_transport_error",
                                 "detail": "server_error (503): overloaded (after 3 attempt(s) over 3 s)"}]
    return {"version": "1.0", "kit_version": kit or asyncodebench.__version__, "scenario_id": SCENARIO,
            "valid": valid, "invalid": invalid, "budget": {"unit": "model_response", "per_agent_run": 5,
                                                           "source": source}}


def prediction(runner: dict[str, Any] | None) -> Prediction:
    return Prediction(3, "asyncodebench-demo:minicache", "single", "m", None, "", (), {}, {}, (), (),
                      RunnerFacts.from_line(runner))


def test_a_line_without_a_record_or_with_a_clean_one_says_nothing() -> None:
    assert RunnerFacts.from_line(None) is None and runner_notes(prediction(None)) == ()
    assert runner_notes(prediction(record())) == () and invalid_run_result(prediction(record())) is None


def test_a_budget_override_and_another_kit_version_are_noted() -> None:
    notes = runner_notes(prediction(record(source="--budget", kit="0.3.0")))
    assert notes == ("budget overridden: 5 model responses per agent run (--budget), not the scenario row's",
                     f"run by the agent runner of kit 0.3.0, evaluated with kit {asyncodebench.__version__}")


def test_an_invalid_line_becomes_an_infrastructure_error_that_names_the_agent() -> None:
    result = invalid_run_result(prediction(record(valid=False)))
    assert result is not None and result.evaluation is None and result.failure is not None
    assert result.failure.kind == "agent_run_invalid"
    assert "single_agent: provider_or_transport_error (server_error (503): overloaded" in result.failure.message
    written = result.to_json()
    validator("result").validate(written)
    assert written["runner_notes"][0].startswith("invalid agent run (not a result): single_agent")
    assert PredictionResult.from_json(written).to_json() == written


def line(valid: bool) -> dict[str, Any]:
    return {"task_id": "asyncodebench-demo:minicache", "runner": record(valid)}


def test_an_invalid_scenario_is_not_finished_and_its_attempt_is_set_aside_before_a_redo(tmp_path: Path) -> None:
    runfolder.write_prediction(tmp_path, line(valid=False))
    assert runfolder.finished(tmp_path, SCENARIO) is None
    assert runfolder.invalid_line(tmp_path, SCENARIO) == line(valid=False)
    assert "single_agent: provider_or_transport_error" in runfolder.invalid_reasons(line(valid=False))
    moved = runfolder.set_aside_invalid(tmp_path, SCENARIO)
    folder = runfolder.scenario_folder(tmp_path, SCENARIO)
    assert moved == tmp_path / "invalid-attempts" / folder.name / "1" and not folder.exists()
    assert json.loads((moved / runfolder.INVALID).read_text())["runner"]["valid"] is False
    runfolder.write_prediction(tmp_path, line(valid=True))  # the redo
    assert runfolder.finished(tmp_path, SCENARIO) == line(valid=True)
    assert runfolder.invalid_line(tmp_path, SCENARIO) is None
    assert runfolder.set_aside_invalid(tmp_path, SCENARIO) is None
