"""The run folder on disk: one folder per prediction with fixed file names, every file written atomically.

    <output_dir>/<run_id>/report.json, report.md, *.csv  the run report (its `run` part is the run's metadata)
    <output_dir>/<run_id>/settings.json, run.lock        what produced the results; who holds the folder
    <output_dir>/<run_id>/baselines/<task>.json          each task's base state in this image (decision 9)
    <output_dir>/<run_id>/predictions/<slug>/patch.diff  the predicted patch, as given
        execution.json   preparation and evaluator facts     evaluator_output.txt  last MB of output
        report.json      the raw pytest-json-report          probes.json           raw probe runs
        states.json      intermediate checkpoint states
        dependency_probe_checkpoints.jsonl                    checkpoints in the upstream layout
        result.json      the graded result: present with status "evaluated" means finished

A prediction is finished when its `result.json` says "evaluated"; anything else is redone on the next run, so an
interrupted run (even `kill -9`) resumes without losing or recomputing finished work.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from asyncodebench.dataset.validation import validator
from asyncodebench.files import write_atomic
from asyncodebench.harness.evaluation import Evidence, Preparation, StateEvidence
from asyncodebench.harness.integration import AgentMerge, Integration
from asyncodebench.harness.native import BuildRun
from asyncodebench.harness.probes import ProbeCall, ProbeRun
from asyncodebench.harness.sandbox import OUTPUT_CAP_BYTES
from asyncodebench.run.prediction_result import PredictionResult

PATCH, EXECUTION, OUTPUT = "patch.diff", "execution.json", "evaluator_output.txt"
REPORT, PROBES = "report.json", "probes.json"
CHECKPOINTS, RESULT = "dependency_probe_checkpoints.jsonl", "result.json"
STATES = "states.json"


def write_json(path: Path, value: Any) -> None:
    """Write `value` to `path` as indented JSON, atomically; values JSON has no type for are written as text."""
    write_atomic(path, json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    """The JSON value in `path`."""
    return json.loads(path.read_text(encoding="utf-8"))


def is_finished(folder: Path) -> bool:
    """Whether the prediction's folder holds an evaluated result (an infrastructure error is tried again)."""
    try:
        return read_json(folder / RESULT).get("status") == "evaluated"
    except (FileNotFoundError, ValueError):
        return False


def save_outcome(folder: Path, result: PredictionResult, evidence: Evidence | None = None) -> None:
    """Write one prediction's outcome, as the driver does whichever executor evaluated it: the evidence first, then
    the result, whose presence marks the work finished."""
    if evidence is not None:
        save_evidence(folder, evidence)
    write_result(folder, result)


def write_result(folder: Path, result: PredictionResult) -> None:
    """Write the checkpoints file (upstream layout) and then the result, checked against its schema.

    Raises:
        jsonschema.ValidationError: the kit made a result its own schema refuses (a bug; nothing is written).
    """
    record = result.to_json()
    _result_validator().validate(record)
    if result.evaluation is not None:
        write_atomic(folder / CHECKPOINTS, "".join(json.dumps(c) + "\n" for c in result.checkpoints))
    write_json(folder / RESULT, record)


def read_result(folder: Path) -> PredictionResult:
    """The result saved in `folder`, with its checkpoint records: what `write_result` wrote.

    Raises:
        FileNotFoundError: the prediction has no result yet.
        ValueError: the file is not a result record.
    """
    path = folder / CHECKPOINTS
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return PredictionResult.from_json(read_json(folder / RESULT), [json.loads(line) for line in lines])


def read_results(folders: Iterable[Path]) -> list[PredictionResult]:
    """The results saved in those of `folders` that hold one, in their order (a prediction not evaluated yet has
    none): what reports, comparisons and publishing read.

    Raises:
        ValueError: a result file is not a result record.
    """
    return [read_result(folder) for folder in folders if (folder / RESULT).exists()]


@functools.cache
def _result_validator() -> Any:
    return validator("result")


def save_evidence(folder: Path, evidence: Evidence) -> None:
    """Write the evidence's files (execution record, output, report, probe runs, states) as `load_evidence` reads
    them; a report left from an earlier attempt is removed when this one has none."""
    write_json(folder / EXECUTION, evidence.execution_record())
    write_atomic(folder / OUTPUT, evidence.output)
    if evidence.report is not None:
        write_json(folder / REPORT, evidence.report)
    else:
        (folder / REPORT).unlink(missing_ok=True)
    write_json(folder / PROBES, _probes_record(evidence.probes))
    write_json(folder / STATES, [
        {"checkpoint_type": s.checkpoint_type, "workspace_kind": s.workspace_kind, "agent_id": s.agent_id,
         "preparation": asdict(s.preparation), "probes": _probes_record(s.probes),
         "build": s.build.to_json() if s.build else None} for s in evidence.states])


def load_evidence(folder: Path) -> Evidence:
    """Rebuild the evidence saved in `folder`, for rescoring without containers.

    Raises:
        FileNotFoundError: the folder lacks the execution record; the prediction was never evaluated.
    """
    execution = read_json(folder / EXECUTION)
    output = (folder / OUTPUT).read_text(encoding="utf-8", errors="replace")
    report_path = folder / REPORT
    states_path = folder / STATES
    states = tuple(
        StateEvidence(s["checkpoint_type"], s["workspace_kind"], s["agent_id"], stored_preparation(s["preparation"]),
                      _probes_from(s["probes"]), _build_from(s.get("build")))
        for s in (read_json(states_path) if states_path.exists() else [])
    )
    return Evidence(
        preparation=stored_preparation(execution["preparation"]), exit_code=execution["exit_code"],
        timed_out=execution["timed_out"],
        killed_by_watchdog=execution["killed_by_watchdog"], evaluator_seconds=execution["evaluator_seconds"],
        output=output,
        report=read_json(report_path) if report_path.exists() else None,
        probes=_probes_from(read_json(folder / PROBES)), container_name=execution["container_name"],
        command=tuple(execution["command"]), states=states, integration=_integration(execution.get("integration")),
        report_problem=execution.get("report_problem"), sentinel=execution.get("sentinel"),
        build=_build_from(execution.get("build")),
        output_capped=execution.get("output_capped", len(output.encode()) >= OUTPUT_CAP_BYTES),
        attempts=execution.get("attempts", 1), limits=tuple(execution.get("limits", ())),
    )


def _build_from(record: dict[str, Any] | None) -> BuildRun | None:
    """A state's native build from its saved record (None: no build, or evidence saved before builds existed)."""
    return BuildRun.from_json(record) if record else None


def stored_preparation(record: dict[str, Any]) -> Preparation:
    """A `Preparation` from its saved record."""
    return Preparation(**_tuples(record))


def _integration(record: dict[str, Any] | None) -> Integration | None:
    if record is None:
        return None
    merges = tuple(AgentMerge(**_tuples(m)) for m in record["merges"])
    return Integration(record["protocol"], merges, record["final_state"])


def _probes_record(run: ProbeRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"mode": run.mode, "probe_timeout": run.probe_timeout, "calls": [
        {"selectors": list(c.selectors), "exit_code": c.exit_code, "timed_out": c.timed_out, "tests": list(c.tests),
         "report_found": c.report_found, "output_tail": c.output_tail, "summary": c.summary,
         "failed_collectors": c.failed_collectors, "sentinel": c.sentinel, "output_capped": c.output_capped,
         "attempts": c.attempts, "limits": list(c.limits)} for c in run.calls]}


def _probes_from(record: dict[str, Any] | None) -> ProbeRun | None:
    if record is None:
        return None
    calls = tuple(
        ProbeCall(tuple(c["selectors"]), c["exit_code"], c["timed_out"], tuple(c["tests"]), c["report_found"],
                  c["output_tail"], c.get("summary"), c.get("failed_collectors", 0), c.get("sentinel"),
                  c.get("output_capped", False), c.get("attempts", 1), tuple(c.get("limits", ())))
        for c in record["calls"]
    )
    return ProbeRun(record["mode"], calls, record["probe_timeout"])


def _tuples(record: dict[str, Any]) -> dict[str, Any]:
    """A saved record's fields with its lists back as the tuples the frozen records hold."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}
