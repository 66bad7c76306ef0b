"""Ctrl-C (or SIGTERM) during a run: the run's containers are removed, nothing half-done is recorded, the same run
id resumes."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from helpers.checkout import ROOT, script_env
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import evaluate_command
from helpers.polling import wait_for
from helpers.predictions import example_predictions, jsonl

from asyncodebench.run.runfolder import prediction_folders, result_files

pytestmark = pytest.mark.docker


def test_ctrl_c_removes_the_containers_and_the_rerun_resumes(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    examples = example_predictions()
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([examples["demo-gold"], examples["hostile-infinite-loop"]]))
    out = tmp_path / "runs"
    # One worker: the loop starts only once the gold prediction has finished (its containers removed), and the
    # signal goes as soon as a container of the run exists after that, the loop's, so however slow the machine,
    # the run is still in the loop's 20 s when interrupted; with two workers a loaded machine could let both end
    # first. The resume must use the same settings (a run folder keeps the ones its results were made with). No
    # probes: they would only lengthen the loop's evaluation on resume (one probe limit per selector), and
    # interrupting is the same with or without them.
    flags = ("--timeout", "20", "--no-probes")
    command = evaluate_command(preds, demo_dataset.path, "ctrlc", out, "--max-workers", "1", *flags)
    process = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    folders = lambda name: [f for f in prediction_folders(out / "ctrlc") if f.name.startswith(name)]  # noqa: E731
    gold_done = lambda: any((f / "result.json").exists() for f in folders("demo-gold__"))  # noqa: E731
    assert wait_for(lambda: gold_done() and run_containers("ctrlc"), 300), "the run never got going"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "resume with:" in stderr, stderr
    resume = shlex.split(stderr.split("resume with:\n", 1)[1].splitlines()[0])  # the printed command, as pasted
    assert resume[2:] == [str(preds), "--dataset", str(demo_dataset.path), "--run-id", "ctrlc", "--output-dir",
                          str(out), "--max-workers", "1", *flags]
    assert run_containers("ctrlc") == []
    (loop,) = folders("hostile-infinite-loop__")
    assert not (loop / "result.json").exists()  # interrupted work is not recorded as anything
    (gold,) = folders("demo-gold__")
    before = (gold / "result.json").stat().st_mtime_ns

    done = subprocess.run(resume, cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "1 predictions were already finished" in done.stdout
    assert (gold / "result.json").stat().st_mtime_ns == before
    assert json.loads((loop / "result.json").read_text())["outcome"] == "model_failure:timeout"


def test_sigterm_cleans_up_as_ctrl_c_does(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    """SIGTERM (what a job scheduler or `timeout` sends) while a prediction runs: exit 143, the run's containers
    removed, nothing recorded for the stopped work."""
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([example_predictions()["hostile-infinite-loop"]]))
    command = evaluate_command(preds, demo_dataset.path, "sigterm", tmp_path / "runs", "--timeout", "60")
    process = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert wait_for(lambda: run_containers("sigterm"), 120), "the run never got going"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143 and "--run-id sigterm --output-dir" in stderr.split("resume with:")[1], stderr
    assert run_containers("sigterm") == []
    assert not result_files(tmp_path / "runs" / "sigterm")
