"""Checkpoint records in the schema 0.1 layout, and the refusals of load_checkpoint_file (METRICS 0.1 step 4)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from asyncodebench.scoring.checkpoints import (
    CheckpointContext,
    CheckpointFileError,
    build_checkpoint_record,
    load_checkpoint_file,
    next_logical_step,
    probe_selectors,
)
from asyncodebench.scoring.dependency import DependencyPoint, run_metrics
from asyncodebench.scoring.grading import SelectorResult, selector_status

DEPENDENCIES = [
    DependencyPoint.from_row({
        "dependency_id": "t.version_to_width", "producer_agent": "version_agent", "consumer_agent": "width_agent",
        "upstream_probe_tests": ["tests/test_v.py::test_latest"],
        "downstream_probe_tests": ["tests/test_w.py::test_width"],
        "integrated_probe_tests": ["tests/test_v.py::test_latest", "tests/test_w.py::test_width"],
    }),
    DependencyPoint.from_row({
        "dependency_id": "t.width_to_integration", "producer_agent": "width_agent", "consumer_agent": "integrator",
        "upstream_probe_tests": ["tests/test_w.py::test_width"],
        "downstream_probe_tests": None,
        "integrated_probe_tests": ["tests/test_w.py::test_emoji"],
    }),
]
SELECTORS = ["tests/test_v.py::test_latest", "tests/test_w.py::test_emoji", "tests/test_w.py::test_width"]

CONTEXT = CheckpointContext(
    task_id="asyncodebench:t", source_task_id="commit0:t", metric_annotation_id="t-metrics-v0.3",
    metrics_manifest="commit0_t_async_metrics.json", checkpoint_id="agent_artifact:version_agent",
    checkpoint_type="agent_artifact", logical_step=1, recorded_at="2025-01-01T00:00:01+00:00",
    agent_id="version_agent", task_assignment_id="t.version", workspace_kind="agent_workspace",
    workspace_path="/work/agents/version_agent", artifact_version="v1", visible_upstream_artifact_version=None,
    integrated_workspace_version=None, probe_execution_mode="per_selector", probe_timeout_seconds=60,
    source_build=None,
)

LAYOUT_FIELDS = {
    "schema_version", "task_id", "source_task_id", "metric_annotation_id", "metrics_manifest", "checkpoint_id",
    "checkpoint_type", "logical_step", "recorded_at", "agent_id", "task_assignment_id", "workspace_kind",
    "workspace_path", "artifact_version", "visible_upstream_artifact_version", "integrated_workspace_version",
    "pytest_exit_code", "pytest_summary", "probe_execution_mode", "probe_timeout_seconds", "timed_out",
    "selector_exit_codes", "selector_timed_out", "probe_test_results", "dependency_results", "test_output_excerpt",
    "source_build",
}


def _results(outcomes: dict[str, str]) -> dict[str, SelectorResult]:
    """Selector results from one outcome per selector; "timeout" and "missing" leave the report without it."""
    results = {}
    for selector in SELECTORS:
        outcome = outcomes.get(selector, "passed")
        tests = [] if outcome in ("timeout", "missing") else [{"nodeid": selector, "outcome": outcome}]
        results[selector] = selector_status(selector, tests, 124 if outcome == "timeout" else 0, False)
    return results


def _record(step: int, outcomes: dict[str, str] | None = None, final: bool = False, output: str = "") -> dict[str, Any]:
    context = replace(CONTEXT, logical_step=step, recorded_at=f"2025-01-01T00:00:{step:02d}+00:00")
    if final:
        context = replace(context, checkpoint_id="final_integrated", checkpoint_type="final_integrated",
                          workspace_kind="integrated_workspace", agent_id=None)
    results = _results(outcomes or {})
    codes = {selector: 124 if result.status == "timed_out" else 0 for selector, result in results.items()}
    return build_checkpoint_record(context, DEPENDENCIES, results, codes, output)


def _write(tmp_path: Path, records: list[dict[str, Any]], extra_lines: tuple[str, ...] = ()) -> Path:
    path = tmp_path / "dependency_probe_checkpoints.jsonl"
    lines = [json.dumps(record, sort_keys=True) for record in records]
    path.write_text("\n".join([*lines, *extra_lines]) + "\n", encoding="utf-8")
    return path


# --- building records -------------------------------------------------------------------------------------------


def test_selector_set_is_the_sorted_union_of_all_groups() -> None:
    assert probe_selectors(DEPENDENCIES) == SELECTORS


def test_record_carries_every_layout_field_and_is_json() -> None:
    record = _record(1)
    assert set(record) == LAYOUT_FIELDS
    assert record["schema_version"] == "0.1"
    assert json.loads(json.dumps(record)) == record


def test_record_groups_follow_the_dependency_rows() -> None:
    record = _record(1, {"tests/test_w.py::test_width": "skipped"})
    version, width = record["dependency_results"]
    assert version["groups"]["upstream"] == {"selectors": ["tests/test_v.py::test_latest"], "passed": True,
                                             "passed_count": 1, "total": 1}
    assert version["groups"]["integrated"]["passed"] is False
    assert version["groups"]["integrated"]["passed_count"] == 1
    assert width["groups"]["downstream"] == {"selectors": [], "passed": False, "passed_count": 0, "total": 0}
    assert width["consumer_agent"] == "integrator"


@pytest.mark.parametrize(
    ("outcomes", "exit_code", "timed_out"),
    [
        ({}, 0, False),
        ({"tests/test_w.py::test_emoji": "failed"}, 1, False),
        ({"tests/test_w.py::test_emoji": "missing"}, 1, False),
        ({"tests/test_w.py::test_emoji": "failed", "tests/test_v.py::test_latest": "timeout"}, 124, True),
    ],
)
def test_pytest_exit_code_is_124_on_any_timeout_0_when_all_passed_else_1(
    outcomes: dict[str, str], exit_code: int, timed_out: bool
) -> None:
    record = _record(1, outcomes)
    assert record["pytest_exit_code"] == exit_code
    assert record["timed_out"] is timed_out
    assert record["selector_timed_out"]["tests/test_v.py::test_latest"] is timed_out


def test_pytest_summary_counts_selector_statuses() -> None:
    record = _record(1, {"tests/test_w.py::test_emoji": "missing", "tests/test_v.py::test_latest": "xfailed"})
    assert record["pytest_summary"] == {"total": 3, "passed": 1, "failed": 1, "not_collected": 1, "timed_out": 0}
    assert record["probe_test_results"]["tests/test_w.py::test_emoji"]["status"] == "not_collected"


def test_output_excerpt_keeps_the_last_4000_characters() -> None:
    output = "head" + "x" * 3996 + "tail!!"
    record = _record(1, output=output)
    assert len(record["test_output_excerpt"]) == 4000
    assert record["test_output_excerpt"].endswith("tail!!") and "head" not in record["test_output_excerpt"]


def test_building_a_record_refuses_an_unprobed_selector() -> None:
    results = _results({})
    del results["tests/test_w.py::test_emoji"]
    with pytest.raises(ValueError, match=r"tests/test_w\.py::test_emoji"):
        build_checkpoint_record(CONTEXT, DEPENDENCIES, results, dict.fromkeys(SELECTORS, 0), "")


def test_next_logical_step_counts_non_empty_lines() -> None:
    assert next_logical_step("") == 1
    assert next_logical_step('{"a": 1}\n\n{"b": 2}\n') == 3


# --- loading recorded files -------------------------------------------------------------------------------------


def test_round_trip_from_built_records_to_run_metrics(tmp_path: Path) -> None:
    records = [
        _record(1, {"tests/test_w.py::test_width": "failed", "tests/test_w.py::test_emoji": "failed"}),
        _record(2, {"tests/test_w.py::test_emoji": "failed"}),
        _record(3, final=True),
    ]
    loaded = load_checkpoint_file(_write(tmp_path, records, extra_lines=("",)), DEPENDENCIES)
    assert [record.logical_step for record in loaded] == [1, 2, 3]
    assert loaded[-1].is_final
    run = run_metrics(loaded, DEPENDENCIES)
    assert run.adpr == 1.0
    assert [dep.up for dep in run.dependencies] == [1, 2]
    assert run.dependencies[1].down is None, "an empty downstream list never passes"


def _refusal(tmp_path: Path, records: list[dict[str, Any]], match: str, extra: tuple[str, ...] = ()) -> None:
    with pytest.raises(CheckpointFileError, match=match):
        load_checkpoint_file(_write(tmp_path, records, extra), DEPENDENCIES)


def test_refuses_malformed_json(tmp_path: Path) -> None:
    _refusal(tmp_path, [_record(1)], r"line 2: malformed JSON", extra=('{"logical_step": 2,',))


def test_refuses_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    _refusal(tmp_path, [], r"line 1: expected a JSON object, got list", extra=("[1, 2]",))


def test_refuses_missing_fields(tmp_path: Path) -> None:
    record = _record(1, final=True)
    del record["workspace_kind"], record["recorded_at"]
    _refusal(tmp_path, [record], r"line 1: missing field\(s\) \['recorded_at', 'workspace_kind'\]")


def test_refuses_an_unknown_schema_version(tmp_path: Path) -> None:
    record = _record(1, final=True) | {"schema_version": "0.2"}
    _refusal(tmp_path, [record], r"line 1: schema_version is '0.2'")


def test_refuses_steps_out_of_write_order(tmp_path: Path) -> None:
    _refusal(tmp_path, [_record(1), _record(3), _record(2, final=True)], r"line 2: logical_step is 3, expected 2")


def test_refuses_steps_not_starting_at_one(tmp_path: Path) -> None:
    _refusal(tmp_path, [_record(2, final=True)], r"line 1: logical_step is 2, expected 1")


def test_refuses_a_non_integer_step(tmp_path: Path) -> None:
    record = _record(1, final=True) | {"logical_step": "1"}
    _refusal(tmp_path, [record], r"line 1: .*logical_step must be an int")


def test_refuses_a_file_without_final_checkpoint(tmp_path: Path) -> None:
    _refusal(tmp_path, [_record(1), _record(2)], r"line 2: no final_integrated checkpoint")


def test_refuses_a_checkpoint_after_the_final_one(tmp_path: Path) -> None:
    _refusal(tmp_path, [_record(1, final=True), _record(2)], r"line 2: a checkpoint follows the final_integrated")


def test_refuses_an_empty_file(tmp_path: Path) -> None:
    _refusal(tmp_path, [], r"holds no checkpoints", extra=("",))


def test_refuses_a_record_missing_a_dependency(tmp_path: Path) -> None:
    record = _record(1, final=True)
    record["dependency_results"] = record["dependency_results"][:1]
    _refusal(tmp_path, [record], r"line 1: dependency 't.width_to_integration' .* missing from dependency_results")


def test_refuses_a_record_missing_a_selector(tmp_path: Path) -> None:
    record = _record(1, final=True)
    del record["probe_test_results"]["tests/test_w.py::test_emoji"]
    _refusal(tmp_path, [record], r"line 1: selector 'tests/test_w.py::test_emoji' of the dependency rows")


def test_refuses_a_group_verdict_its_probes_contradict(tmp_path: Path) -> None:
    record = _record(1, {"tests/test_w.py::test_emoji": "failed"}, final=True)
    record["dependency_results"][1]["groups"]["integrated"]["passed"] = True
    _refusal(tmp_path, [record], r"line 1: .*'integrated' records passed=True but .* give False")


def test_refuses_a_record_missing_a_group(tmp_path: Path) -> None:
    record = _record(1, final=True)
    del record["dependency_results"][0]["groups"]["downstream"]
    _refusal(tmp_path, [record], r"line 1: dependency 't.version_to_width' has no 'downstream' group")
