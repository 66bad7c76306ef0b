"""Ctrl-C (or SIGTERM) during a run: the run's containers are removed, nothing half-done is recorded, the same run id resumes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import (ROOT, DemoDataset, evaluate_command, example_predictions, jsonl, run_containers, script_env,
                      wait_for)

pytestmark = pytest.mark.docker


def _interrupted_run(demo_dataset: DemoDataset, tmp_path: Path, run_id: str, sig: int,
                     code: int) -> tuple[Path, Path, tuple[str, ...]]:
    """A run of the gold patch and an infinite loop, stopped by `sig` once the gold patch is done: it exits with
    `code`, removes its containers and records nothing for the work it stopped."""
    examples = example_predictions()
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([examples["demo-gold"], examples["hostile-infinite-loop"]]))
    out = tmp_path / "runs"
    # The resume must use the same settings (a run folder keeps the ones its results were made with): 20 s keeps
    # the infinite loop running well past the gold patch's end, and its probes take longer still.
    flags = ("--timeout", "20", "--probe-timeout", "10")
    command = evaluate_command(preds, demo_dataset.path, run_id, out, "--max-workers", "2", *flags)
    process = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    folders = out / run_id / "predictions"
    gold_done = lambda: any((f / "result.json").exists() for f in folders.glob("demo-gold__*"))  # noqa: E731
    assert wait_for(lambda: gold_done() and run_containers(run_id), 120), "the run never got going"
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code and f"resume with --run-id {run_id}" in stderr
    assert run_containers(run_id) == []
    (loop,) = folders.glob("hostile-infinite-loop__*")
    assert not (loop / "result.json").exists()  # interrupted work is not recorded as anything
    return preds, out, flags


def test_sigterm_cleans_up_as_ctrl_c_does(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    _interrupted_run(demo_dataset, tmp_path, "sigterm", signal.SIGTERM, 143)


def test_ctrl_c_removes_the_containers_and_the_rerun_resumes(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    preds, out, flags = _interrupted_run(demo_dataset, tmp_path, "ctrlc", signal.SIGINT, 130)
    folders = out / "ctrlc" / "predictions"
    (loop,) = folders.glob("hostile-infinite-loop__*")
    (gold,) = folders.glob("demo-gold__*")
    before = (gold / "result.json").stat().st_mtime_ns

    done = subprocess.run(evaluate_command(preds, demo_dataset.path, "ctrlc", out, *flags),
                          cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "1 predictions were already finished" in done.stdout
    assert (gold / "result.json").stat().st_mtime_ns == before
    assert json.loads((loop / "result.json").read_text())["outcome"] == "model_failure:timeout"
