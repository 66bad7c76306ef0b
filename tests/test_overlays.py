"""Tasks with upstream overlay patches (13 of the 19): applied on the base before the prediction, verified by sha256,
part of the canonical state the tests are restored from; missing or altered overlays are infrastructure errors."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID
from helpers.dataset_folders import DemoDataset, write_variant_dataset
from helpers.demo_overlay import OVERLAY, OVERLAY_PATH
from helpers.demo_run import FAST_FLAGS, EvalRun
from helpers.predictions import prediction

from asyncodebench.dataset.rows import load_published
from asyncodebench.dataset.statement import compose_statement

pytestmark = pytest.mark.docker

GOLD = (DEMO_DIR / "patches" / "gold.patch").read_text()
# Deletes the overlay's test: restored from the canonical (base + overlays) state before grading.
DELETE_OVERLAY_TEST = """diff --git a/tests/test_overlay.py b/tests/test_overlay.py
deleted file mode 100644
--- a/tests/test_overlay.py
+++ /dev/null
@@ -1,2 +0,0 @@
-def test_overlay_is_applied():
-    assert True
"""


@pytest.fixture(scope="module")
def overlay_setup(demo_dataset: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("upstream-checkout")
    (root / OVERLAY_PATH).parent.mkdir(parents=True)
    (root / OVERLAY_PATH).write_bytes(OVERLAY)
    overlay = {"path": OVERLAY_PATH, "sha256": hashlib.sha256(OVERLAY).hexdigest()}
    dataset = write_variant_dataset(tmp_path_factory.mktemp("overlay-dataset"), demo_dataset.digest,
                                    [{"overlays": [overlay]}])
    return dataset, root


def test_overlay_is_applied_before_the_patch_and_its_tests_count(
    overlay_setup: tuple[Path, Path], evaluate: Callable[..., EvalRun]
) -> None:
    dataset, root = overlay_setup
    run = evaluate([prediction("gold", GOLD), prediction("deletes-overlay-test", GOLD + DELETE_OVERLAY_TEST)],
                   dataset, *FAST_FLAGS, "--overlays-dir", str(root))
    assert run.returncode == 0, run.stderr
    gold = run.result("gold")
    assert gold["final_success"] and gold["tests_passed"] == 26 and gold["tests_denominator"] == 26
    assert "tests/test_overlay.py::test_overlay_is_applied" in (run.folder("gold") / "report.json").read_text()
    deleting = run.result("deletes-overlay-test")
    assert deleting["protection"]["restored_paths"] == ["tests/test_overlay.py"]
    assert deleting["tests_passed"] == 26  # the overlay's test came back from the canonical state
    # The base revision has no tests/test_overlay.py: the preparation restored it from base plus overlays, and the
    # generated Tests section of a task with overlays says exactly that.
    assert not (DEMO_DIR / "repo" / "tests" / "test_overlay.py").exists()
    row = next(t for t in load_published(str(dataset)).rows.tasks if t["task_id"] == DEMO_TASK_ID)
    tests = compose_statement(row, "prose").split("## Tests", 1)[1]
    assert "as they are at the\nbase revision with the task's overlay patches applied" in tests


def test_missing_overlays_are_an_infrastructure_error_not_a_score(
    overlay_setup: tuple[Path, Path], evaluate: Callable[..., EvalRun]
) -> None:
    dataset, _ = overlay_setup
    run = evaluate([prediction("gold", GOLD)], dataset, *FAST_FLAGS)
    assert run.returncode == 3
    (row,) = run.report["predictions"]
    assert row["status"] == "infrastructure_error" and row["infrastructure_error"]["kind"] == "overlay_missing"
    assert "--overlays-dir" in row["infrastructure_error"]["message"]
    assert run.report["summary"][0]["evaluated"] == 0


def test_an_altered_overlay_is_refused_by_its_sha256(
    overlay_setup: tuple[Path, Path], evaluate: Callable[..., EvalRun], tmp_path: Path
) -> None:
    dataset, _ = overlay_setup
    (tmp_path / OVERLAY_PATH).parent.mkdir(parents=True)
    (tmp_path / OVERLAY_PATH).write_bytes(OVERLAY.replace(b"assert True", b"assert 1"))
    run = evaluate([prediction("gold", GOLD)], dataset, *FAST_FLAGS, "--overlays-dir", str(tmp_path))
    assert run.returncode == 3
    (row,) = run.report["predictions"]
    assert row["infrastructure_error"]["kind"] == "overlay_missing"
    assert "the row pins" in row["infrastructure_error"]["message"]
    assert DEMO_TASK_ID == row["task_id"]
