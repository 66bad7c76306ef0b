"""A run folder on a shared machine (issue 8): one process at a time, its own containers, its own settings.

- A second evaluate.py on a run folder another process holds is refused (exit 2) and the first is unaffected.
- The same run id under two output folders runs at the same time without either touching the other's containers.
- Resuming with other settings is refused, naming each difference; `--force` re-evaluates with the new ones.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import DEMO_TASK_ID, ROOT, script_env
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset, write_variant_dataset
from helpers.demo_run import EvalRun, evaluate_command, run_evaluate
from helpers.polling import wait_for
from helpers.predictions import example_predictions, jsonl

from asyncodebench.run.runfolder import container_key, result_files

pytestmark = pytest.mark.docker

# The infinite loop keeps its evaluator container alive for the whole --timeout; probes are off, so it ends then.
SLOW_FLAGS = ("--timeout", "15", "--no-probes", "--max-workers", "2")


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def containers_named(run_id: str) -> list[str]:
    """Containers whose name carries this run id (`asyncodebench-<run id>-...`), whatever their label."""
    done = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, check=True)
    return [n for n in done.stdout.split() if n.startswith(f"asyncodebench-{run_id}-")]


def wait_or_fail(condition: Any, seconds: float, what: str) -> None:
    if not wait_for(condition, seconds):
        pytest.fail(f"timed out waiting for {what}")


def start(preds: Path, dataset: Path, run_id: str, output_dir: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(evaluate_command(preds, dataset, run_id, output_dir, *flags), cwd=ROOT,
                            env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, run_dir: Path) -> EvalRun:
    stdout, stderr = process.communicate(timeout=600)
    report = run_dir / "report.json"
    return EvalRun(process.returncode, stdout, stderr, run_dir,
                   json.loads(report.read_text()) if report.exists() else None)


def slow_predictions(tmp_path: Path) -> Path:
    examples = example_predictions()
    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([examples["hostile-infinite-loop"], examples["demo-gold"]]))
    return preds


def gold_done(run_dir: Path) -> bool:
    return any(f.parent.name.startswith("demo-gold__") for f in result_files(run_dir))


def infrastructure_errors(run: EvalRun) -> list[Any]:
    """What went wrong with the infrastructure, as the run recorded it (for a failing test's message)."""
    results = result_files(run.run_dir)
    return [r.get("infrastructure_error") for r in map(json.loads, map(Path.read_text, results))
            if r.get("infrastructure_error")]


def assert_both_evaluated_as_they_behave(run: EvalRun) -> None:
    assert run.returncode == 0, (infrastructure_errors(run), run.stderr[-3000:])
    assert run.report["counts"]["evaluated"] == 2 and run.report["counts"]["infrastructure_errors"] == 0
    outcomes = {r["model_name_or_path"]: r["outcome"] for r in run.report["predictions"]}
    assert outcomes == {"hostile-infinite-loop": "model_failure:timeout", "demo-gold": "passed"}


# --- 8. one process per run folder; containers keyed by run folder ----------------------------------------------


def test_a_second_process_on_a_held_run_folder_is_refused_and_the_first_is_unaffected(
        demo_dataset: DemoDataset, tmp_path: Path) -> None:
    preds, run_id, out = slow_predictions(tmp_path), unique("held"), tmp_path / "runs"
    first = start(preds, demo_dataset.path, run_id, out, *SLOW_FLAGS)
    try:
        wait_or_fail(lambda: gold_done(out / run_id) and containers_named(run_id), 180,
                 "the first process to be evaluating the slow prediction")
        second = run_evaluate(preds, demo_dataset.path, run_id, out, *SLOW_FLAGS)
        assert first.poll() is None, "the first process ended before the second was tried"
    finally:
        first_run = finish(first, out / run_id)
    assert second.returncode == 2, second.stderr[-3000:]
    assert "Traceback" not in second.stderr
    (error,) = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert f"the run folder {out / run_id} is in use by process {first.pid}" in error and "--run-id" in error
    assert_both_evaluated_as_they_behave(first_run)
    assert run_containers(run_id) == []


def test_the_same_run_id_in_two_output_folders_runs_concurrently_without_harm(
        demo_dataset: DemoDataset, tmp_path: Path) -> None:
    preds, run_id = slow_predictions(tmp_path), unique("twin")
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    first = start(preds, demo_dataset.path, run_id, out_a, *SLOW_FLAGS)
    try:
        # The first run's loop container is alive (its gold patch already done) when the second starts, whose
        # start-up cleanup of leftovers must not take it.
        wait_or_fail(lambda: gold_done(out_a / run_id) and containers_named(run_id), 180,
                 "the first run to be evaluating the slow prediction")
        second = start(preds, demo_dataset.path, run_id, out_b, *SLOW_FLAGS)
    finally:
        run_a = finish(first, out_a / run_id)
    run_b = finish(second, out_b / run_id)
    assert_both_evaluated_as_they_behave(run_a)
    assert_both_evaluated_as_they_behave(run_b)
    labels = {run_a.report["run"]["container_label"], run_b.report["run"]["container_label"]}
    assert labels == {container_key(out_a / run_id, run_id), container_key(out_b / run_id, run_id)}
    assert len(labels) == 2 and all(label.startswith(f"{run_id}-") for label in labels)
    assert run_a.report["run"]["run_id"] == run_b.report["run"]["run_id"] == run_id  # what users see is unchanged
    assert run_containers(run_id) == []


def test_a_kill_9_releases_the_run_folder(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    preds, run_id, out = slow_predictions(tmp_path), unique("killed"), tmp_path / "runs"
    first = start(preds, demo_dataset.path, run_id, out, *SLOW_FLAGS)
    wait_or_fail(lambda: containers_named(run_id), 180, "the first process to start a container")
    first.kill()
    first.communicate(timeout=60)
    resumed = run_evaluate(preds, demo_dataset.path, run_id, out, *SLOW_FLAGS)
    assert_both_evaluated_as_they_behave(resumed)
    assert run_containers(run_id) == []


# --- 9. settings kept with the results --------------------------------------------------------------------------


def test_resuming_with_other_settings_is_refused_naming_each_difference_and_force_redoes_everything(
        demo_dataset: DemoDataset, tmp_path: Path) -> None:
    examples = example_predictions()
    preds, run_id, out = tmp_path / "preds.jsonl", unique("settings"), tmp_path / "runs"
    preds.write_bytes(jsonl([examples["demo-gold"], examples["demo-empty"]]))
    flags = ("--timeout", "20", "--probe-timeout", "10")
    first = run_evaluate(preds, demo_dataset.path, run_id, out, *flags)
    assert first.returncode == 0, first.stderr[-3000:]
    recorded = json.loads((out / run_id / "settings.json").read_text())
    assert (recorded["timeout_seconds"], recorded["run_probes"], recorded["limits"]["memory"]) == (20, True, "4g")
    finished = {f: f.stat().st_mtime_ns for f in result_files(out / run_id)}
    assert len(finished) == 2

    changed = run_evaluate(preds, demo_dataset.path, run_id, out, "--timeout", "30", "--probe-timeout", "10",
                           "--no-probes", "--memory", "2g")
    assert changed.returncode == 2, changed.stderr[-3000:]
    assert "Traceback" not in changed.stderr
    (error,) = [line for line in changed.stderr.splitlines() if line.startswith("error:")]
    for words in ("--timeout: was 20, now 30", "probes: were on, now off (--no-probes)", "limit memory: was 4g, now 2g",
                  "--run-id", "--force"):
        assert words in error, (words, error)
    assert "--probe-timeout" not in error  # unchanged settings are not named

    other_rows = write_variant_dataset(tmp_path / "other-dataset", demo_dataset.digest,
                                       [{}, {"task_id": f"{DEMO_TASK_ID}-copy"}])
    moved = run_evaluate(preds, other_rows, run_id, out, *flags)
    assert moved.returncode == 2
    (error,) = [line for line in moved.stderr.splitlines() if line.startswith("error:")]
    assert f"dataset: was local folder {demo_dataset.path.resolve()}" in error and str(other_rows.resolve()) in error
    assert {f: f.stat().st_mtime_ns for f in finished} == finished  # nothing was redone or lost

    forced = run_evaluate(preds, demo_dataset.path, run_id, out, "--timeout", "30", "--probe-timeout", "10",
                          "--no-probes", "--force")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert all(f.stat().st_mtime_ns != mtime for f, mtime in finished.items())  # re-evaluated
    settings = forced.report["run"]["settings"]
    assert (settings["timeout_seconds"], settings["run_probes"]) == (30, False)
    assert json.loads((out / run_id / "settings.json").read_text())["timeout_seconds"] == 30

    resumed = run_evaluate(preds, demo_dataset.path, run_id, out, "--timeout", "30", "--probe-timeout", "10",
                           "--no-probes")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "2 predictions were already finished" in resumed.stdout
