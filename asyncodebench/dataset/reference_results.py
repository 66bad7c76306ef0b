"""Each task's reference result (data/reference_results.yaml): the evaluator's counts with every writable file as
upstream wrote it, and so whether a prediction of the task can reach final success at all.

Where code outside the writable paths stays hollow even after the overlays (flask, filesystem_spec), the reference
itself fails tests, so no prediction can succeed; a report's FSR of such a cell is read against how many of its tasks
can succeed. A task whose image cannot run here (TVM) is recorded as not measured, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

RECORD_FILE = Path(__file__).resolve().parents[2] / "data" / "reference_results.yaml"
COUNT_KEYS = ("collected", "passed", "failed", "errors", "skipped")


@dataclass(frozen=True)
class ReferenceResult:
    """One task's measured reference state, or why it was not measured."""

    task_id: str
    counts: dict[str, int] | None  # collected, passed, failed, errors, skipped; None when not measured
    reaches_final_success: bool | None  # None when not measured
    hollow: str | None = None  # what stays hollow outside the writable paths, when it cannot succeed
    command: str | None = None
    image: str | None = None
    not_measured: str | None = None

    @property
    def counts_text(self) -> str:
        """`passed of collected` as the statements and the card say it."""
        assert self.counts is not None
        return f"{self.counts['passed']} of {self.counts['collected']}"


class ReferenceResultError(ValueError):
    """The record file is malformed; the message says which task and what to fix."""


def load(path: Path = RECORD_FILE) -> dict[str, ReferenceResult]:
    """The recorded reference results by task id (empty when the file is absent, as in a folder without the kit)."""
    if not path.exists():
        return {}
    raw = yaml.safe_load(path.read_text()) or {}
    return {task_id: _result(task_id, entry) for task_id, entry in (raw.get("tasks") or {}).items()}


def _result(task_id: str, entry: dict[str, Any]) -> ReferenceResult:
    if "not_measured" in entry:
        return ReferenceResult(task_id, None, None, not_measured=str(entry["not_measured"]))
    counts = entry.get("counts") or {}
    if set(counts) != set(COUNT_KEYS) or not all(isinstance(counts[k], int) for k in COUNT_KEYS):
        raise ReferenceResultError(f"{task_id} in {RECORD_FILE.name}: counts must give {', '.join(COUNT_KEYS)}")
    reaches = counts["failed"] == 0 and counts["errors"] == 0
    if entry.get("reaches_final_success") is not reaches:
        raise ReferenceResultError(f"{task_id} in {RECORD_FILE.name}: reaches_final_success must be {reaches} for "
                                   f"{counts['failed']} failed and {counts['errors']} errors")
    if not reaches and not entry.get("hollow"):
        raise ReferenceResultError(f"{task_id} in {RECORD_FILE.name}: say what stays hollow (`hollow`)")
    if not entry.get("command") or not entry.get("image"):
        raise ReferenceResultError(f"{task_id} in {RECORD_FILE.name}: give the command and the image")
    return ReferenceResult(task_id, dict(counts), reaches, entry.get("hollow"), entry["command"], entry["image"])


def reachable_counts(task_ids: set[str] | list[str], results: dict[str, ReferenceResult]) -> tuple[int, int]:
    """(tasks among `task_ids` that can reach final success, tasks whose reference was not measured)."""
    known = [results.get(t) for t in task_ids]
    reachable = sum(r is not None and r.reaches_final_success is True for r in known)
    unmeasured = sum(r is None or r.reaches_final_success is None for r in known)
    return reachable, unmeasured
