"""A prediction's folder in the run folder is computed in one place (`runfolder.prediction_folder`): the runner writes
there, the HTML report links there, the tests read there."""

from __future__ import annotations

from pathlib import Path

from asyncodebench.reports.htmlreport import prediction_folder as linked_folder
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.runfolder import prediction_folder, prediction_folders, prediction_path, result_files


def _prediction(line: int, model: str, run_id: str | None = None) -> Prediction:
    return Prediction(line, "asyncodebench-demo:minicache", "async_private", model, run_id, "", (), {}, {})


def test_the_folder_is_named_by_the_prediction_key_under_predictions(tmp_path: Path) -> None:
    prediction = _prediction(3, "org/model v2", "r1")
    assert prediction_folder(tmp_path, prediction) == tmp_path / "predictions" / prediction.slug
    assert str(prediction_path(prediction)) == f"predictions/{prediction.slug}"
    assert prediction.slug.startswith("org-model-v2__async_private__asyncodebench-demo-minicache__r1__")
    # the line is no part of the key: the same prediction on another line of a resumed file finds its folder
    assert prediction_folder(tmp_path, _prediction(9, "org/model v2", "r1")) == prediction_folder(tmp_path, prediction)


def test_the_report_links_the_same_folder() -> None:
    prediction = _prediction(3, "m", "r1")
    row = {"line": 3, "task_id": prediction.task_id, "protocol": prediction.protocol, "model_name_or_path": "m",
           "prediction_run_id": "r1"}
    assert linked_folder(row) == str(prediction_path(prediction))


def test_folders_and_results_of_a_run_folder(tmp_path: Path) -> None:
    assert prediction_folders(tmp_path) == [] and result_files(tmp_path) == []
    done, pending = (prediction_folder(tmp_path, _prediction(i, m)) for i, m in ((1, "a"), (2, "b")))
    for folder in (done, pending):
        folder.mkdir(parents=True)
    (done / "result.json").write_text("{}")
    (tmp_path / "predictions" / ".result.json.tmp").write_text("")  # not a folder: not a prediction
    assert prediction_folders(tmp_path) == [done, pending]
    assert result_files(tmp_path) == [done / "result.json"]
