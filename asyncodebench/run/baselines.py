"""Each task's base-state record in the run folder (`baselines/<task>.json`): resuming and rescoring read the same
floor the first start measured (the measurement itself is `harness/baseline.py`)."""

from __future__ import annotations

from pathlib import Path

from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.run import store
from asyncodebench.scoring.grading import Baseline


def baseline_path(run_dir: Path, task_id: str) -> Path:
    """Where the run folder keeps the task's base-state record: `baselines/<task>.json`."""
    return run_dir / "baselines" / f"{task_id.replace(':', '__').replace('/', '_')}.json"


def read(run_dir: Path, task_id: str) -> BaseStateRecord | None:
    """The record this run folder holds for the task, whatever its image; None when there is none."""
    path = baseline_path(run_dir, task_id)
    return BaseStateRecord.from_json(store.read_json(path)) if path.exists() else None


def recorded(run_dir: Path, spec: TaskSpec) -> BaseStateRecord | None:
    """The record this run already holds for the task's image, or None when it must be measured."""
    record = read(run_dir, spec.task_id)
    return record if record is not None and record.pinned_ref == spec.pinned_ref else None


def save(run_dir: Path, record: BaseStateRecord) -> None:
    """Keep the task's base-state record in the run folder, replacing the one it held."""
    store.write_json(baseline_path(run_dir, record.task_id), record.to_json())


def load(run_dir: Path, spec: TaskSpec) -> Baseline | None:
    """The floor of decision 9 for scoring (and rescoring); None when the run has no baseline for the task."""
    record = read(run_dir, spec.task_id)
    return record.floor(spec) if record is not None else None
