"""Tokens, calls, cost and time as the predictions report them (METRICS section 10), and the links to the agents'
trajectories: read from untrusted predictions, summarized per cell, shown in report.md, never scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asyncodebench.reports.report import usage_table
from asyncodebench.reports.usage import row_usage, summarize_usage, trajectory_links
from asyncodebench.run.predictions import Prediction


def _prediction(usage: Any = None, trajectories: tuple[str, ...] = ()) -> Prediction:
    return Prediction(line=1, task_id="asyncodebench-demo:minicache", protocol="single", model="m", run_id=None,
                      model_patch="", checkpoints=(), agent_patches={}, usage=usage or {}, trajectories=trajectories)


def test_total_tokens_is_prompt_plus_completion_and_bad_values_read_as_not_reported() -> None:
    assert row_usage(_prediction({"prompt_tokens": 10, "completion_tokens": 5, "model_calls": 3})) == {
        "input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "model_calls": 3, "cost_usd": None,
        "runtime_seconds": None}
    hostile = row_usage(_prediction({"prompt_tokens": -1, "completion_tokens": "9", "total_tokens": True,
                                     "runtime_seconds": float("nan"), "cost_usd": 0.5}))
    assert hostile == {"input_tokens": None, "output_tokens": None, "total_tokens": None, "model_calls": None,
                       "cost_usd": 0.5, "runtime_seconds": None}


def test_cell_means_are_macro_over_tasks_and_totals_are_sums() -> None:
    rows = [{"task_id": "a", "total_tokens": 100, "runtime_seconds": 10, "model_calls": 2},
            {"task_id": "a", "total_tokens": 300, "runtime_seconds": 30, "model_calls": 4},
            {"task_id": "b", "total_tokens": 1000, "runtime_seconds": None, "model_calls": None},
            {"task_id": "b"}]
    summary = summarize_usage(rows)
    assert summary == {"usage_reported": 3, "mean_total_tokens": (200 + 1000) / 2, "total_tokens": 1400,
                       "mean_runtime_seconds": 20.0, "runtime_seconds": 40, "model_calls": 6, "cost_usd": None}
    assert summarize_usage([{"task_id": "a"}])["mean_total_tokens"] is None


def test_trajectory_links_resolve_from_the_run_folder_and_untrusted_names_are_dropped(tmp_path: Path) -> None:
    agents_run = tmp_path / "agents-run"
    (agents_run / "scenarios" / "s1" / "trajectories").mkdir(parents=True)
    (agents_run / "scenarios" / "s1" / "trajectories" / "core.jsonl").write_text("{}\n")
    (tmp_path / "secret").write_text("x")
    eval_run = tmp_path / "runs" / "eval"
    eval_run.mkdir(parents=True)
    names = ("scenarios/s1/trajectories/core.jsonl", "../secret", "/etc/passwd", "scenarios/missing.jsonl")
    links = trajectory_links(_prediction(trajectories=names), agents_run / "predictions.jsonl", eval_run)
    assert links == ["../../agents-run/scenarios/s1/trajectories/core.jsonl"]
    assert (eval_run / links[0]).read_text() == "{}\n"


def test_report_md_shows_the_usage_table_only_when_something_was_reported() -> None:
    row: dict[str, Any] = {"model_name_or_path": "m", "protocol": "single", "predictions": 2, "usage_reported": 2,
                           "mean_total_tokens": 1500.0, "total_tokens": 3000, "model_calls": 8,
                           "mean_runtime_seconds": 12.5, "runtime_seconds": 25.0, "cost_usd": None}
    table = "\n".join(usage_table([row]))
    assert "| m | single | 2/2 | 1,500 | 3,000 | 8 | 12.5 | 25.0 | n/a |" in table
    assert usage_table([{**row, "usage_reported": 0, "runtime_seconds": None}]) == []
