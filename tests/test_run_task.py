"""scripts/run_task.py, the one-task debugging tool, evaluates a patch or the base state and prints the result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID, ROOT, script_env
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import FAST_FLAGS, run_evaluate
from helpers.predictions import example_predictions

pytestmark = pytest.mark.docker

# Where run_task.py's JSON may differ from the result.json (plus its checkpoint records) that evaluate.py writes for
# the same patch, and why; everything else must be equal. `*` stands for every element of a list.
DIFFERING_FIELDS = {
    ("line",): "run_task.py's prediction is line 0 of its own",
    ("model_name_or_path",): "run_task.py's prediction is model `run_task` (the file's is the example's name)",
    ("evaluator", "seconds"): "how long the evaluator ran",
    ("checkpoints", "*", "recorded_at"): "when the checkpoint was recorded",
    ("checkpoints", "*", "test_output_excerpt"): "pytest's output: durations and each run's own random sentinel "
                                                 "test names",
}


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


def test_the_json_equals_the_result_json_evaluate_writes_for_the_same_patch(demo_dataset: DemoDataset,
                                                                            tmp_path: Path) -> None:
    """The same node functions (the base state first, then the patch held to it) and the same writer: the base-state
    floor is there, and nothing differs but the prediction's identity and the timings (`DIFFERING_FIELDS`)."""
    gold = example_predictions()["demo-gold"]
    assert gold["protocol"] == "single" and not gold.get("run_id")  # as run_task.py's own prediction
    patch = tmp_path / "gold.diff"
    patch.write_bytes(gold["model_patch"].encode("utf-8", "surrogateescape"))
    done = run_task(DEMO_TASK_ID, "--patch", str(patch), "--dataset", str(demo_dataset.path), *FAST_FLAGS)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = json.loads(done.stdout)
    run = run_evaluate([gold], demo_dataset.path, "run-task-equals", tmp_path / "runs", *FAST_FLAGS)
    assert run.returncode == 0, run.stderr[-2000:]
    folder = run.folder("demo-gold")
    saved = {**run.result("demo-gold"), "checkpoints": [
        json.loads(line) for line in (folder / "dependency_probe_checkpoints.jsonl").read_text().splitlines()]}

    assert printed["integrity"]["baseline"] is not None  # held to the base state, as evaluate.py holds it
    assert list(printed) == list(saved)  # the same fields in the same order
    for path in DIFFERING_FIELDS:
        _drop(printed, path)
        _drop(saved, path)
    assert printed == saved


def _drop(value: Any, path: tuple[str, ...]) -> None:
    """Remove the field at `path` (`*`: in every element of a list), which must be there."""
    head, *rest = path
    if head == "*":
        assert value, f"no element to drop {path} from"
        for item in value:
            _drop(item, tuple(rest))
    elif rest:
        _drop(value[head], tuple(rest))
    else:
        del value[head]
