"""The typed result record (run/prediction_result.py): exactly the JSON the kit writes, checked by its schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from helpers.demo_run import EvalRun

from asyncodebench.dataset.validation import validator
from asyncodebench.run import store
from asyncodebench.run.prediction_result import INFRASTRUCTURE_KINDS, Identity, InfrastructureFailure, PredictionResult
from asyncodebench.run.runfolder import prediction_folders

IDENTITY = Identity("asyncodebench-demo:minicache", "single", "m", None, 3)


def test_an_infrastructure_failure_has_a_known_kind_and_no_score() -> None:
    result = PredictionResult(IDENTITY, failure=InfrastructureFailure("sandbox_unavailable", "daemon gone"))
    assert result.to_json() == {
        "schema_version": "1.0", "status": "infrastructure_error", "task_id": "asyncodebench-demo:minicache",
        "protocol": "single", "model_name_or_path": "m", "prediction_run_id": None, "line": 3,
        "infrastructure_error": {"kind": "sandbox_unavailable", "message": "daemon gone"}}
    assert PredictionResult.from_json(result.to_json()) == result
    validator("result").validate(result.to_json())
    retold = result.with_failure_message("3 attempt(s) failed: a | b")
    assert retold.failure == InfrastructureFailure("sandbox_unavailable", "3 attempt(s) failed: a | b")
    assert result.failure is not None and result.failure.message == "daemon gone"  # the first is unchanged
    with pytest.raises(ValueError, match="unknown infrastructure error kind 'cosmic_ray'"):
        InfrastructureFailure("cosmic_ray", "x")  # type: ignore[arg-type]


def test_a_result_is_evaluated_or_failed_never_both_nor_neither() -> None:
    with pytest.raises(ValueError, match="either an evaluation or an infrastructure failure"):
        PredictionResult(IDENTITY)
    with pytest.raises(ValueError, match="unknown result status"):
        PredictionResult.from_json({**IDENTITY.to_json(), "status": "done"})


def test_the_schema_knows_every_infrastructure_kind_the_type_knows() -> None:
    schema = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "result.schema.json").read_text())
    (failed,) = [s for s in schema["oneOf"] if s["properties"]["status"] == {"const": "infrastructure_error"}]
    assert tuple(failed["properties"]["infrastructure_error"]["properties"]["kind"]["enum"]) == INFRASTRUCTURE_KINDS


def test_the_run_folder_refuses_to_write_a_result_its_schema_refuses(tmp_path: Path) -> None:
    bad = PredictionResult(Identity("t", "single", "m", None, -1),  # a line number below 0
                           failure=InfrastructureFailure("harness_error", "x"))
    with pytest.raises(jsonschema.ValidationError):
        store.write_result(tmp_path, bad)
    assert not (tmp_path / store.RESULT).exists()


@pytest.mark.docker
def test_every_result_of_the_demo_run_reads_back_to_the_same_bytes(shared_demo_run: EvalRun) -> None:
    """Evaluated, zeroed, integrated, tampered and infrastructure results alike: from_json then to_json gives the
    file byte for byte, and the checkpoint records ride along unchanged."""
    folders = prediction_folders(shared_demo_run.run_dir)
    statuses = set()
    for folder in folders:
        written = (folder / store.RESULT).read_text(encoding="utf-8")
        checkpoints = (folder / store.CHECKPOINTS).read_text().splitlines() \
            if (folder / store.CHECKPOINTS).exists() else []
        result = store.read_result(folder)
        assert json.dumps(result.to_json(), indent=2, default=str) + "\n" == written, folder.name
        assert [json.dumps(c) for c in result.checkpoints] == checkpoints
        statuses.add(result.status)
    assert len(folders) >= 15 and "evaluated" in statuses


def test_reports_read_the_results_the_run_folder_holds(tmp_path: Path) -> None:
    """The synthetic stand-ins are results the schema accepts; written to prediction folders and read back with
    `store.read_results` (a folder without a result skipped), they give the report the typed records give."""
    from asyncodebench.reports.report import build_report
    from asyncodebench.reports.synthetic import synthetic_inputs, typed_results

    metadata, file, records = synthetic_inputs(tasks=2, points=3, models=("m",), protocols=("single", "async_private"))
    folders = []
    for result in typed_results(records):
        folder = tmp_path / str(result.identity.line)
        folder.mkdir()
        store.write_result(folder, result)  # checked against schemas/result.schema.json
        folders.append(folder)
    (tmp_path / "unfinished").mkdir()
    read = store.read_results([*folders[:2], tmp_path / "unfinished", *folders[2:]])
    assert read == typed_results(records)
    assert build_report(metadata, file, read) == build_report(metadata, file, typed_results(records))


def test_the_old_result_rules_are_the_typed_records(tmp_path: Path) -> None:
    """A result written before review flags, out-of-scope paths and image provenance existed reads as one that was
    not reviewed (n/a, not 0), changed nothing outside its paths and ran on the official image: the report's row
    says so from the typed record alone."""
    from asyncodebench.reports.report import prediction_row
    from asyncodebench.reports.synthetic import synthetic_inputs

    _, _, (record, *_) = synthetic_inputs(tasks=1, points=1, models=("m",), protocols=("single",),
                                          infrastructure_errors=0)
    reviewed = {**record, "integrity": {**record["integrity"], "review": {"count": 0, "flags": []}}}
    old = json.loads(json.dumps(record))
    del old["protection"]["out_of_scope_paths"]
    del old["image"]["provenance"]
    row = prediction_row(PredictionResult.from_json(old))
    assert (row["review_flag_count"], row["review_flags"], row["out_of_scope_paths"], row["image_provenance"]) == (
        None, [], [], "official")
    assert prediction_row(PredictionResult.from_json(reviewed))["review_flag_count"] == 0
    assert "review" not in PredictionResult.from_json(old).to_json()["integrity"]  # not written as null
