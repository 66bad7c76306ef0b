"""scripts/run_task.py, the one-task debugging tool, evaluates a patch or the base state and prints the result."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID, ROOT, script_env
from helpers.dataset_folders import DemoDataset

pytestmark = pytest.mark.docker


def run_task(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "run_task.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=script_env())


def test_gold_patch_prints_a_final_success_with_full_adpr(demo_dataset: DemoDataset) -> None:
    done = run_task(DEMO_TASK_ID, "--patch", str(DEMO_DIR / "patches" / "gold.patch"), "--dataset",
                    str(demo_dataset.path), "--timeout", "20", "--probe-timeout", "10")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert (result["final_success"], result["pass_rate"], result["adpr"]) == (True, 1.0, 1.0)


def test_base_without_probes_shows_the_evaluator_output(demo_dataset: DemoDataset) -> None:
    done = run_task(DEMO_TASK_ID, "--base", "--no-probes", "--show-output", "--dataset", str(demo_dataset.path))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert (result["tests_passed"], result["tests_denominator"], result["patch"]["status"]) == (7, 25, "empty")
    assert (result["adpr"], result["run_metrics"]["drs_penalized_mean"]) == (None, None)  # not measured, not 0
    # pytest's own line, the harness's four sentinel tests included (one of each outcome), and the note saying so
    assert "19 failed, 8 passed, 1 skipped, 1 error" in done.stderr and "4 sentinel tests" in done.stderr


def test_unknown_task_and_missing_patch_file_exit_2(demo_dataset: DemoDataset) -> None:
    assert run_task("asyncodebench:nope", "--base", "--dataset", str(demo_dataset.path)).returncode == 2
    assert run_task(DEMO_TASK_ID, "--patch", "/nonexistent.diff", "--dataset", str(demo_dataset.path)).returncode == 2
