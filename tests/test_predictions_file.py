"""A predictions file with bad lines: each bad line is reported with its number and kind, the good ones are kept.

`read_predictions` is tested directly; evaluate.py is run on files whose lines are all bad (no container starts,
so no Docker) and once with Docker on a mixed file, where the good lines must be evaluated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.checkout import DEMO_TASK_ID
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import EvalRun
from helpers.predictions import jsonl, prediction

from asyncodebench.run.predictions import read_predictions

TASKS = {DEMO_TASK_ID: {"core_agent", "api_agent"}}

BAD_LINES: list[tuple[dict[str, Any] | bytes, str, str]] = [  # (line, kind, words the message must contain)
    (b'{"task_id": "asyncodebench-demo:minicache", "model_name_or_path": ', "malformed_json", "not valid JSON"),
    ({"task_id": DEMO_TASK_ID, "protocol": "single", "model_patch": ""}, "schema_error", "model_name_or_path"),
    (prediction("m-unknown-task", "", task_id="asyncodebench:nope"), "unknown_task", "asyncodebench:nope"),
    (prediction("m-bad-protocol", "", protocol="solo"), "unknown_protocol", "'solo'"),
    (b'["a list", "not an object"]', "schema_error", "JSON object"),
    ({**prediction("m-both-ids", ""), "instance_id": DEMO_TASK_ID}, "schema_error", "instance_id"),
    (json.dumps(prediction("m-\udce9", "")).encode(), "schema_error", "not valid UTF-8"),
]


def _read(tmp_path: Path, lines: list[dict[str, Any] | bytes] | bytes, default_protocol: str | None = None):
    path = tmp_path / "preds.jsonl"
    path.write_bytes(lines if isinstance(lines, bytes) else jsonl(lines))
    return read_predictions(path, TASKS, default_protocol)


def test_each_bad_line_is_reported_with_its_number_kind_and_cause(tmp_path: Path) -> None:
    good = prediction("m-good", "")
    file = _read(tmp_path, [good] + [line for line, _, _ in BAD_LINES] + [good])
    assert [p.model for p in file.predictions] == ["m-good"]
    problems = {p.line: p for p in file.problems}
    for number, (_, kind, words) in enumerate(BAD_LINES, start=2):
        assert problems[number].kind == kind, (number, problems[number])
        assert words in problems[number].message, (number, problems[number])
    assert problems[len(BAD_LINES) + 2].kind == "duplicate" and "line 1" in problems[len(BAD_LINES) + 2].message


def test_missing_protocol_uses_the_default_or_says_how_to_give_one(tmp_path: Path) -> None:
    line = {"task_id": DEMO_TASK_ID, "model_name_or_path": "m", "model_patch": None}
    assert _read(tmp_path, [line], default_protocol="async_private").predictions[0].protocol == "async_private"
    (problem,) = _read(tmp_path, [line]).problems
    assert problem.kind == "unknown_protocol" and "--protocol" in problem.message


def test_instance_id_is_an_alias_of_task_id(tmp_path: Path) -> None:
    line = {"instance_id": DEMO_TASK_ID, "model_name_or_path": "swe-style", "protocol": "single", "model_patch": ""}
    (only,) = _read(tmp_path, [line]).predictions
    assert only.task_id == DEMO_TASK_ID and only.model_patch == ""


def test_a_json_list_is_read_like_jsonl_with_item_numbers(tmp_path: Path) -> None:
    items = [prediction("m1", ""), {"task_id": DEMO_TASK_ID}, prediction("m2", None)]
    file = _read(tmp_path, json.dumps(items, indent=2).encode())
    assert [(p.line, p.model) for p in file.predictions] == [(1, "m1"), (3, "m2")]
    assert [(p.line, p.kind) for p in file.problems] == [(2, "schema_error")]


def test_an_invalid_json_list_is_one_clear_problem(tmp_path: Path) -> None:
    (problem,) = _read(tmp_path, b'[{"task_id": "x"},').problems
    assert (problem.line, problem.kind) == (1, "malformed_json") and "JSON list" in problem.message


def test_blank_lines_and_a_byte_order_mark_do_not_shift_or_break_lines(tmp_path: Path) -> None:
    text = b"\xef\xbb\xbf" + jsonl([prediction("m1", "")]) + b"\n\n" + jsonl([b"{oops", prediction("m2", "")])
    file = _read(tmp_path, text)
    assert [(p.line, p.model) for p in file.predictions] == [(1, "m1"), (5, "m2")]
    assert [(p.line, p.kind) for p in file.problems] == [(4, "malformed_json")]


def test_the_same_model_task_and_protocol_with_another_run_id_is_not_a_duplicate(tmp_path: Path) -> None:
    file = _read(tmp_path, [prediction("m", "", run_id="r1"), prediction("m", "", run_id="r2"), prediction("m", "")])
    assert len(file.predictions) == 3 and not file.problems


def test_evaluate_reports_bad_lines_on_stderr_and_in_the_report(offline_demo_dataset: Path,
                                                                 evaluate: Callable[..., EvalRun]) -> None:
    """With no valid line nothing starts a container, so this needs no Docker; exit code 1 = invalid lines."""
    run = evaluate([line for line, _, _ in BAD_LINES], offline_demo_dataset)
    assert run.returncode == 1, run.stderr[-2000:]
    problems = run.report["line_problems"]
    assert [(p["line"], p["kind"]) for p in problems] == [(n, kind) for n, (_, kind, _) in enumerate(BAD_LINES, 1)]
    for p in problems:
        assert f".jsonl:{p['line']}: {p['kind']}: " in run.stderr
    assert run.report["counts"] == {"valid_predictions": 0, "invalid_lines": len(BAD_LINES), "evaluated": 0,
                                    "infrastructure_errors": 0, "not_evaluated": 0}


def test_evaluate_rejects_bad_arguments_with_exit_2(offline_demo_dataset: Path, evaluate: Callable[..., EvalRun],
                                                    tmp_path: Path) -> None:
    preds = tmp_path / "p.jsonl"
    preds.write_bytes(jsonl([prediction("m", "")]))
    assert evaluate(preds, offline_demo_dataset, "--tasks", "asyncodebench:nope").returncode == 2
    assert evaluate(preds, offline_demo_dataset, "--max-workers", "0").returncode == 2
    assert evaluate(tmp_path / "missing.jsonl", offline_demo_dataset).returncode == 2


@pytest.mark.docker
def test_good_lines_are_evaluated_next_to_bad_ones(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> None:
    lines: list[dict[str, Any] | bytes] = [
        b"not json at all",
        {"instance_id": DEMO_TASK_ID, "model_name_or_path": "alias-empty", "model_patch": ""},
        prediction("m-unknown-task", "", task_id="asyncodebench:nope"),
        {"instance_id": DEMO_TASK_ID, "model_name_or_path": "alias-empty", "model_patch": ""},
    ]
    run = evaluate(lines, demo_dataset.path, "--no-probes", "--protocol", "single", "--timeout", "20")
    assert run.returncode == 1, run.stderr[-2000:]
    assert [(p["line"], p["kind"]) for p in run.report["line_problems"]] == [
        (1, "malformed_json"), (3, "unknown_task"), (4, "duplicate")]
    (row,) = run.report["predictions"]
    assert (row["line"], row["status"], row["protocol"], row["tests_passed"]) == (2, "evaluated", "single", 7)
