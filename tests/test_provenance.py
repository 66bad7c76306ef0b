"""Timeline provenance (asyncodebench/scoring/provenance.py, issue 27 item 7): a line's own checkpoints with the
agent runner's hash chain over them and its trajectory files read as `recorded`; every way of breaking the tie
(no chain, an edited checkpoint, an edited or missing trajectory, a link out of order, a path outside the predictions
file's folder) reads as `self_reported` with where it breaks; agent patches are the harness's. Through the real
predictions-file reader, on files in a temporary folder (no Docker)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.checkout import DEMO_TASK_ID
from helpers.predictions import jsonl, prediction

from asyncodebench.reports.flags import row_flags
from asyncodebench.run.predictions import read_predictions
from asyncodebench.scoring.provenance import Timeline, chain

TASKS = {DEMO_TASK_ID: {"core_agent", "api_agent"}}
CHECKPOINTS = [
    {"checkpoint_type": "agent_artifact", "workspace_kind": "agent_workspace", "agent_id": "core_agent", "patch": "a"},
    {"checkpoint_type": "integration_after_merge", "workspace_kind": "integrated_workspace", "agent_id": "core_agent",
     "patch": "a"},
    {"checkpoint_type": "final_integrated", "workspace_kind": "integrated_workspace", "agent_id": None, "patch": "a"},
]
TRAJECTORY = "scenarios/s__1/trajectories/core_agent.jsonl"


def _line(folder: Path) -> dict[str, Any]:
    """A manager-protocol line as the runner writes it, its trajectory file beside the predictions file."""
    (folder / TRAJECTORY).parent.mkdir(parents=True, exist_ok=True)
    (folder / TRAJECTORY).write_text('{"kind": "response", "text": "done"}\n')
    line = {**prediction("m", "a", protocol="caid_manager"), "checkpoints": copy.deepcopy(CHECKPOINTS),
            "trajectories": [TRAJECTORY]}
    files = {"core_agent": [(TRAJECTORY, (folder / TRAJECTORY).read_bytes())]}
    line["runner"] = {"timeline": chain(CHECKPOINTS, files)}
    return line


def _timeline(folder: Path, line: dict[str, Any]) -> Timeline | None:
    path = folder / "predictions.jsonl"
    path.write_bytes(jsonl([line]))
    read = read_predictions(path, TASKS, None)
    assert read.problems == (), read.problems
    return read.predictions[0].timeline


def test_the_runner_s_chain_reads_as_recorded(tmp_path: Path) -> None:
    assert _timeline(tmp_path, _line(tmp_path)) == Timeline("recorded")


def _edit_checkpoint(line: dict[str, Any], folder: Path) -> None:
    line["checkpoints"][1]["patch"] = "b"


def _edit_trajectory(line: dict[str, Any], folder: Path) -> None:
    (folder / TRAJECTORY).write_text('{"kind": "response", "text": "something else"}\n')


def _drop_trajectory(line: dict[str, Any], folder: Path) -> None:
    (folder / TRAJECTORY).unlink()


def _reorder(line: dict[str, Any], folder: Path) -> None:
    line["runner"]["timeline"][0], line["runner"]["timeline"][1] = line["runner"]["timeline"][1], \
        line["runner"]["timeline"][0]


def _relink(line: dict[str, Any], folder: Path) -> None:
    """A forger who edits a checkpoint and its entry's hash but not the links after it."""
    line["checkpoints"][0]["patch"] = "forged"
    line["runner"]["timeline"][0]["patch_sha256"] = chain(line["checkpoints"], {})[0]["patch_sha256"]


def _outside(line: dict[str, Any], folder: Path) -> None:
    outside = folder.parent / f"{folder.name}-elsewhere.jsonl"
    outside.write_text("{}\n")
    rebuilt = chain(line["checkpoints"], {"core_agent": [(f"../{outside.name}", outside.read_bytes())]})
    line["runner"]["timeline"] = rebuilt


def _no_chain(line: dict[str, Any], folder: Path) -> None:
    del line["runner"]["timeline"]


def _short_chain(line: dict[str, Any], folder: Path) -> None:
    line["runner"]["timeline"].pop()


@pytest.mark.parametrize(("tamper", "words"), [
    (_edit_checkpoint, "checkpoint 1 is not the one link 1 records"),
    (_edit_trajectory, "changed since link 0 was made"),
    (_drop_trajectory, "is not beside the predictions file"),
    (_reorder, "link 0 does not follow"),
    (_relink, "link 0 does not follow"),
    (_outside, "is not beside the predictions file"),
    (_no_chain, "no runner.timeline hash chain"),
    (_short_chain, "2 links for 3 checkpoints"),
])
def test_each_broken_tie_reads_as_self_reported_with_where_it_breaks(
        tmp_path: Path, tamper: Callable[[dict[str, Any], Path], None], words: str) -> None:
    line = _line(tmp_path)
    tamper(line, tmp_path)
    timeline = _timeline(tmp_path, line)
    assert timeline is not None and timeline.source == "self_reported" and words in timeline.reason, timeline


def test_agent_patches_are_the_harness_s_timeline_and_a_single_patch_has_none(tmp_path: Path) -> None:
    specialists = {**prediction("m2", "", protocol="serial_specialists"),
                   "agent_patches": {"core_agent": "a", "api_agent": ""}}
    assert _timeline(tmp_path, specialists) == Timeline("harness")
    assert _timeline(tmp_path, prediction("m3", "a")) is None


def test_a_self_reported_timeline_is_flagged_in_its_row() -> None:
    labels = [f.label for f in row_flags({"timeline_source": "self_reported", "timeline_reason": "no chain"})]
    assert "timeline self-reported" in labels
    assert "timeline self-reported" not in [f.label for f in row_flags({"timeline_source": "recorded"})]
    assert json.dumps(Timeline("recorded").to_json()) == '{"source": "recorded", "reason": ""}'
