"""Tokens, model calls, cost and time, as the predictions report them (METRICS section 10): shown, never scored.

A prediction's `usage` comes from whoever made it (our agent runner, or any other), so only non-negative numbers
are taken; anything else reads as not reported. `total_tokens` is prompt + completion when not given. Per (model,
protocol) cell: the macro mean over tasks of tokens and runtime (each task's predictions averaged first, as every
metric here) and their sums, and the sum of model calls and cost.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path, PurePosixPath
from statistics import fmean
from typing import Any

from asyncodebench.run.predictions import Prediction

# report field -> the prediction's usage key (METRICS section 10 names: input/output tokens are prompt/completion)
ROW_FIELDS = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "total_tokens": "total_tokens",
              "model_calls": "model_calls", "cost_usd": "cost_usd", "runtime_seconds": "runtime_seconds"}
MAX_TRAJECTORIES = 64  # links a report row keeps


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        return None
    return value


def row_usage(prediction: Prediction) -> dict[str, Any]:
    """The prediction's usage fields for its report row (None: not reported)."""
    usage = prediction.usage if isinstance(prediction.usage, dict) else {}
    fields = {name: _number(usage.get(key)) for name, key in ROW_FIELDS.items()}
    if fields["total_tokens"] is None and fields["input_tokens"] is not None and fields["output_tokens"] is not None:
        fields["total_tokens"] = fields["input_tokens"] + fields["output_tokens"]
    return fields


def trajectory_links(prediction: Prediction, predictions_file: Path, run_folder: Path) -> list[str]:
    """Links from the run folder (where report.html is) to the agents' trajectories the prediction names, relative
    to its predictions file. Only files that are there get a link (a predictions file copied or concatenated away
    from its run folder names paths that no longer resolve); a name that is absolute or climbs out with `..` is
    dropped, since the predictions file is untrusted."""
    links = []
    for name in prediction.trajectories[:MAX_TRAJECTORIES]:
        path = PurePosixPath(name) if isinstance(name, str) else PurePosixPath("/")
        target = predictions_file.parent.resolve() / path
        if path.is_absolute() or ".." in path.parts or not path.parts or not target.is_file():
            continue
        links.append(os.path.relpath(target, run_folder.resolve()))
    return links


def summarize_usage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell's usage from its report rows: how many reported tokens, the macro means over tasks and the sums."""
    reported = [r for r in rows if r.get("total_tokens") is not None]
    timed = [r for r in rows if r.get("runtime_seconds") is not None]
    calls = [r["model_calls"] for r in rows if r.get("model_calls") is not None]
    costs = [r["cost_usd"] for r in rows if r.get("cost_usd") is not None]
    return {
        "usage_reported": len(reported),
        "mean_total_tokens": _task_mean(reported, "total_tokens"),
        "total_tokens": sum_or_none(reported, "total_tokens"),
        "mean_runtime_seconds": _task_mean(timed, "runtime_seconds"),
        "runtime_seconds": sum_or_none(timed, "runtime_seconds"),
        "model_calls": sum(calls) if calls else None, "cost_usd": sum(costs) if costs else None,
    }


def sum_or_none(rows: list[dict[str, Any]], key: str) -> float | None:
    """The sum of a field over rows, None when no row has it."""
    return sum(r[key] for r in rows) if rows else None


def _task_mean(rows: list[dict[str, Any]], key: str) -> float | None:
    by_task: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(float(row[key]))
    return fmean(fmean(values) for values in by_task.values()) if by_task else None
