"""--images: tasks run on the images an image map names (rebuilt ones), and every output says so; rows never change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID, ROOT, script_env
from helpers.dataset_folders import DemoDataset, RebuiltDemo
from helpers.demo_run import EvalRun
from helpers.predictions import prediction

GOLD = (DEMO_DIR / "patches" / "gold.patch").read_text()


def _map(pinned_ref: str, task_id: str = DEMO_TASK_ID) -> dict[str, Any]:
    return {"schema_version": "1", "images": {task_id: {"pinned_ref": pinned_ref, "provenance": "rebuilt"}}}


@pytest.fixture(scope="module")
def rebuilt_map(rebuilt_demo: RebuiltDemo) -> tuple[Path, str]:
    """The image map scripts/build_task_image.py wrote for the demo image it rebuilt from the recipe."""
    return rebuilt_demo.map_path, rebuilt_demo.pinned_ref


@pytest.fixture(scope="module")
def mapped_run(demo_dataset: DemoDataset, rebuilt_map: tuple[Path, str], evaluate) -> EvalRun:
    return evaluate([prediction("gold-on-rebuilt", GOLD)], demo_dataset.path, "--timeout", "30", "--probe-timeout",
                    "10", "--images", str(rebuilt_map[0]), run_id="image-map")


@pytest.mark.docker
def test_results_and_report_say_which_image_ran(mapped_run: EvalRun, rebuilt_map: tuple[Path, str],
                                                 rebuilt_demo: RebuiltDemo, demo_dataset: DemoDataset) -> None:
    assert mapped_run.returncode == 0, mapped_run.stderr[-2000:]
    result = mapped_run.result("gold-on-rebuilt")
    assert result["image"] == {"pinned_ref": rebuilt_map[1], "provenance": "rebuilt"}
    assert (result["final_success"], result["pass_rate"]) == (True, 1.0)
    source = mapped_run.report["run"]["image_sources"][DEMO_TASK_ID]
    assert (source["pinned_ref"], source["provenance"], source["recipe_sha256"]) == (
        rebuilt_map[1], "rebuilt", rebuilt_demo.entry["recipe_sha256"])
    assert mapped_run.row("gold-on-rebuilt")["image_provenance"] == "rebuilt"
    markdown = (mapped_run.run_dir / "report.md").read_text()
    assert "## Images other than the official ones" in markdown and rebuilt_map[1] in markdown
    rows = json.loads(subprocess.run([sys.executable, "-c", (
        "import json, sys; from asyncodebench.dataset.rows import load_published; "
        "print(json.dumps(load_published(sys.argv[1]).rows.tasks[0]['container_pinned_ref']))"),
        str(demo_dataset.path)], capture_output=True, text=True, env=script_env(), check=True).stdout)
    assert rows == demo_dataset.pinned_ref  # the rows themselves are never changed


@pytest.mark.docker
def test_resuming_without_the_map_is_refused(mapped_run: EvalRun, demo_dataset: DemoDataset, evaluate) -> None:
    again = evaluate([prediction("gold-on-rebuilt", GOLD)], demo_dataset.path, "--timeout", "30",
                     "--probe-timeout", "10", run_id="image-map")
    assert again.returncode == 2 and "images (--images)" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.docker
def test_check_images_and_run_task_use_the_map(demo_dataset: DemoDataset, rebuilt_map: tuple[Path, str]) -> None:
    checked = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_images.py"), "--dataset",
                              str(demo_dataset.path), "--images", str(rebuilt_map[0]), "--json"],
                             capture_output=True, text=True, env=script_env(), timeout=300)
    (status,) = json.loads(checked.stdout)["images"]
    assert (checked.returncode, status["pinned_ref"], status["state"]) == (0, rebuilt_map[1], "match")
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_task.py"), DEMO_TASK_ID, "--dataset",
                          str(demo_dataset.path), "--images", str(rebuilt_map[0]), "--base", "--no-probes"],
                         capture_output=True, text=True, env=script_env(), timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout)["image"] == {"pinned_ref": rebuilt_map[1], "provenance": "rebuilt"}


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not JSON"),
    (json.dumps(_map("127.0.0.1:5000/x/y:v0")), "breaks schemas/image_map.schema.json at images/"),
    (json.dumps(_map("127.0.0.1:5000/x/y@sha256:" + "a" * 64, task_id="asyncodebench:nope")),
     "that the dataset does not have"),
], ids=["malformed", "not-pinned-by-digest", "unknown-task"])
def test_a_bad_map_is_a_clear_bad_argument(offline_demo_dataset: Path, tmp_path: Path, content: str,
                                           message: str) -> None:
    bad = tmp_path / "images.json"
    bad.write_text(content)
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps(prediction("x", GOLD)) + "\n")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(preds), "--dataset",
                           str(offline_demo_dataset), "--images", str(bad), "--output-dir", str(tmp_path / "runs")],
                          capture_output=True, text=True, env=script_env(), timeout=300)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
