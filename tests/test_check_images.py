"""scripts/check_images.py against the real daemon and the local registry: each state, both modes, exit codes.

One dataset holds four rows: the demo image as pinned (match), the same image name pinned to a digest it does not
have (mismatch), a name never pushed (missing) and a registry on a closed port (unreachable with --registry).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import DEMO_TASK_ID, ROOT, script_env
from helpers.dataset_folders import DemoDataset, write_variant_dataset

pytestmark = pytest.mark.docker

WRONG_DIGEST = "sha256:" + "1" * 64
MISMATCH, MISSING, UNREACHABLE = (f"{DEMO_TASK_ID}-{name}" for name in ("mismatch", "missing", "unreachable"))
CLOSED_PORT = 1  # nothing listens on 127.0.0.1:1


@pytest.fixture(scope="module")
def images_dataset(demo_dataset: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    image = demo_dataset.pinned_ref.split("@")[0] + ":v0"
    return write_variant_dataset(tmp_path_factory.mktemp("images-dataset"), demo_dataset.digest, [
        {},
        {"task_id": MISMATCH, "container_digest": WRONG_DIGEST},
        {"task_id": MISSING, "container_image": image.replace("demo-minicache", "never-pushed")},
        {"task_id": UNREACHABLE, "container_image": image.replace(image.split("/")[0], f"127.0.0.1:{CLOSED_PORT}")},
    ])


def check_images(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "check_images.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=script_env(env))


def states(done: subprocess.CompletedProcess) -> dict[str, Any]:
    return {image["task_id"]: image["state"] for image in json.loads(done.stdout)["images"]}


def test_local_mode_tells_match_mismatch_and_missing_apart(images_dataset: Path) -> None:
    done = check_images("--dataset", str(images_dataset), "--json")
    assert done.returncode == 1, done.stderr
    assert states(done) == {DEMO_TASK_ID: "match", MISMATCH: "mismatch", MISSING: "missing", UNREACHABLE: "missing"}
    found = {i["task_id"]: i["found_digests"] for i in json.loads(done.stdout)["images"]}
    assert found[MISMATCH] and WRONG_DIGEST not in found[MISMATCH]  # the digest the local image really has


def test_registry_mode_asks_the_registry_and_reports_an_unreachable_one(images_dataset: Path,
                                                                        demo_dataset: DemoDataset) -> None:
    done = check_images("--dataset", str(images_dataset), "--registry", "--json", "--timeout", "5")
    assert done.returncode == 3, done.stderr
    assert states(done) == {DEMO_TASK_ID: "match", MISMATCH: "mismatch", MISSING: "missing",
                            UNREACHABLE: "unreachable"}
    found = {i["task_id"]: i["found_digests"] for i in json.loads(done.stdout)["images"]}
    assert found[MISMATCH] == [demo_dataset.digest]  # what the tag points to in the registry


@pytest.mark.parametrize("mode", [[], ["--registry"]])
def test_all_matching_exits_0_and_prints_a_table(images_dataset: Path, demo_dataset: DemoDataset,
                                                 mode: list[str]) -> None:
    done = check_images("--dataset", str(images_dataset), "--tasks", DEMO_TASK_ID, *mode)
    assert done.returncode == 0, done.stderr
    assert f"| {DEMO_TASK_ID} | match | {demo_dataset.pinned_ref} |" in done.stdout
    assert "1 match" in done.stdout


def test_the_table_names_each_state_and_the_counts(images_dataset: Path) -> None:
    done = check_images("--dataset", str(images_dataset), "--registry", "--tasks", MISMATCH, MISSING)
    assert done.returncode == 1
    assert f"| {MISMATCH} | mismatch |" in done.stdout and f"| {MISSING} | missing |" in done.stdout
    assert "1 mismatch, 1 missing" in done.stdout


def test_pull_of_a_name_never_pushed_stays_missing_with_the_reason(images_dataset: Path) -> None:
    done = check_images("--dataset", str(images_dataset), "--tasks", MISSING, "--pull", "--json")
    assert done.returncode == 1
    (image,) = json.loads(done.stdout)["images"]
    assert image["state"] == "missing" and "pull failed" in image["detail"]


def test_an_unreachable_daemon_exits_3(images_dataset: Path, tmp_path: Path) -> None:
    done = check_images("--dataset", str(images_dataset), "--json",
                        env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert done.returncode == 3
    assert "not reachable" in json.loads(done.stdout)["error"] and "not reachable" in done.stderr


def test_bad_arguments_exit_2(images_dataset: Path, tmp_path: Path) -> None:
    assert check_images("--dataset", str(images_dataset), "--tasks", "asyncodebench:nope").returncode == 2
    assert check_images("--dataset", str(tmp_path)).returncode == 2  # a folder without Parquet files
    assert check_images("--registry", "--pull").returncode == 2
    assert "Exit codes:" in check_images("--help").stdout
