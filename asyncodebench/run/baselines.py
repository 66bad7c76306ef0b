"""Each task's base-state record in the run folder (`baselines/<task>.json`): resuming and rescoring read the same
floor the first start measured (the measurement itself is `harness/baseline.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asyncodebench.harness.baseline import from_record
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.run import store
from asyncodebench.scoring.grading import Baseline


def baseline_path(run_dir: Path, task_id: str) -> Path:
    return run_dir / "baselines" / f"{task_id.replace(':', '__').replace('/', '_')}.json"


def recorded(run_dir: Path, spec: TaskSpec) -> dict[str, Any] | None:
    """The record this run already holds for the task's image, or None when it must be measured."""
    path = baseline_path(run_dir, spec.task_id)
    if path.exists():
        record = store.read_json(path)
        if record.get("pinned_ref") == spec.pinned_ref:
            return record
    return None


def save(run_dir: Path, record: dict[str, Any]) -> None:
    store.write_json(baseline_path(run_dir, record["task_id"]), record)


def load(run_dir: Path, spec: TaskSpec) -> Baseline | None:
    """The floor of decision 9 for scoring (and rescoring); None when the run has no baseline for the task."""
    path = baseline_path(run_dir, spec.task_id)
    return from_record(store.read_json(path), spec) if path.exists() else None
