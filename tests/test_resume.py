"""An evaluate.py process killed with SIGKILL mid-run resumes on rerun without recomputing finished work, and its
final report equals an uninterrupted run's; `--rescore` regrades the saved artifacts without containers."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import script_env
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import FAST_FLAGS, evaluate_command, run_evaluate, without_run_metadata
from helpers.predictions import example_predictions, jsonl

from asyncodebench.run.runfolder import result_files

pytestmark = pytest.mark.docker

MODELS = ["demo-gold", "demo-empty", "demo-partial", "demo-syntax-error", "hostile-conftest", "hostile-test-edit"]
FLAGS = (*FAST_FLAGS, "--max-workers", "1")


def _finished(run_dir: Path) -> dict[str, tuple[int, int]]:
    """result.json of each finished prediction: (inode, mtime in ns)."""
    return {f.parent.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in result_files(run_dir)}


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {f.parent.name: json.loads(f.read_text()) for f in result_files(run_dir)}


@pytest.fixture(scope="module")
def runs(demo_dataset: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run killed after its first result, its resumption, and an uninterrupted run of the same file."""
    examples = example_predictions()
    output_dir = tmp_path_factory.mktemp("resume")
    preds = output_dir / "preds.jsonl"
    preds.write_bytes(jsonl([examples[m] for m in MODELS]))
    process = subprocess.Popen(evaluate_command(preds, demo_dataset.path, "interrupted", output_dir, *FLAGS),
                               env=script_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not _finished(output_dir / "interrupted") and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    state = {"killed_at": _finished(output_dir / "interrupted"), "killed_returncode": process.returncode}
    state["resumed"] = run_evaluate(preds, demo_dataset.path, "interrupted", output_dir, *FLAGS)
    state["uninterrupted"] = run_evaluate(preds, demo_dataset.path, "uninterrupted", output_dir, *FLAGS)
    return state


def test_the_kill_left_the_run_unfinished(runs: dict[str, Any]) -> None:
    assert runs["killed_returncode"] == -signal.SIGKILL
    assert 1 <= len(runs["killed_at"]) < len(MODELS)


def test_rerun_keeps_finished_results_untouched_and_evaluates_the_rest(runs: dict[str, Any]) -> None:
    resumed = runs["resumed"]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = _finished(resumed.run_dir)
    assert len(after) == len(MODELS)
    for slug, identity in runs["killed_at"].items():
        assert after[slug] == identity, f"{slug} was recomputed"
    assert resumed.report["counts"]["evaluated"] == len(MODELS)


def test_containers_left_by_the_kill_are_removed_by_the_rerun(runs: dict[str, Any]) -> None:
    # SIGKILL gives the harness no chance to clean up: the rerun removes the leftovers of its run id.
    assert run_containers("interrupted") == []


def test_resumed_report_equals_an_uninterrupted_run(runs: dict[str, Any]) -> None:
    resumed, uninterrupted = runs["resumed"], runs["uninterrupted"]
    assert uninterrupted.returncode == 0
    assert without_run_metadata(resumed.report) == without_run_metadata(uninterrupted.report)


def test_rescore_reproduces_every_result_without_docker(runs: dict[str, Any], demo_dataset: DemoDataset,
                                                        tmp_path: Path) -> None:
    """Rescoring reads only saved artifacts: with DOCKER_HOST pointing nowhere it still regrades every prediction
    to the same result record."""
    run_dir = runs["uninterrupted"].run_dir
    before = _results(run_dir)
    rescored = run_evaluate(run_dir.parent / "preds.jsonl", demo_dataset.path, "uninterrupted", run_dir.parent,
                            "--rescore", env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert rescored.returncode == 0, rescored.stderr[-2000:]
    assert _results(run_dir) == before
    assert rescored.report["run"]["settings"]["mode"] == "rescore"
    assert rescored.report["predictions"] == runs["uninterrupted"].report["predictions"]


def test_the_resumed_report_covers_both_sessions(runs: dict[str, Any]) -> None:
    """The report of a killed and resumed run starts at the first session's start and lists both sessions: the
    killed one with its start only (SIGKILL leaves no word), the resumed one with the rest of the work."""
    run = runs["resumed"].report["run"]
    killed, resumed = run["sessions"]
    assert run["started_at"] == killed["started_at"] < resumed["started_at"]
    assert killed == {"started_at": killed["started_at"], "mode": "evaluate", "finished_at": None, "ended": None,
                      "evaluated": None}
    assert resumed["ended"] == "finished" and resumed["finished_at"] == run["finished_at"]
    assert resumed["evaluated"] == len(MODELS) - len(runs["killed_at"])
    assert "in 2 sessions" in (runs["resumed"].run_dir / "report.md").read_text()
    assert len(runs["uninterrupted"].report["run"]["sessions"]) == 1
