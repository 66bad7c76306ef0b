"""scripts/bench_harness.py measures any task of a dataset with any patch, not only the demo's gold patch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.checkout import DEMO_DIR, ROOT, script_env
from helpers.dataset_folders import DemoDataset, write_variant_dataset

pytestmark = pytest.mark.docker

VARIANT = "asyncodebench-demo:bench-variant"


def test_another_task_and_patch_are_measured(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    dataset = write_variant_dataset(tmp_path / "dataset", demo_dataset.digest, [{"task_id": VARIANT}])
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_harness.py"), "--dataset", str(dataset),
                           "--task", VARIANT, "--patch", str(DEMO_DIR / "patches" / "partial.patch"),
                           "--repeats", "1", "--json"], capture_output=True, text=True, env=script_env(),
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout[done.stdout.index("\n{") + 1:])
    assert figures["task"] == VARIANT and "throughput" not in figures  # the demo's predictions fit only the demo
    # The variant row has no dependency rows of its own, so it has no probe selectors to time.
    assert figures["overhead"]["bare_evaluator_s"] > 0 and figures["probe_phase"]["selectors"] == 0
    assert f"({VARIANT};" in done.stdout


def test_a_patch_is_required_for_a_task_other_than_the_demo(offline_demo_dataset: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_harness.py"), "--dataset",
                           str(offline_demo_dataset), "--task", "asyncodebench:cachetools"], capture_output=True,
                          text=True, env=script_env(), timeout=120)
    assert done.returncode == 2 and "--patch is required" in done.stderr and "Traceback" not in done.stderr
