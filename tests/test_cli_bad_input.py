"""Bad input to the command-line scripts (issue 8): no traceback, one clear line saying what to do, the documented
exit code. Nothing here starts a container: the scripts refuse before, or DOCKER_HOST points at no daemon.

The Hub is made unreachable by pointing HF_ENDPOINT at a closed port on 127.0.0.1, with an empty Hugging Face cache.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.checkout import DEMO_TASK_ID, ROOT, script_env
from helpers.predictions import jsonl, prediction

from asyncodebench import cli
from asyncodebench.dataset.rows import load_published
from asyncodebench.reports.report import dataset_source
from asyncodebench.scoring.checkpoints import CheckpointContext, build_checkpoint_record, probe_selectors
from asyncodebench.scoring.dependency import DependencyPoint
from asyncodebench.scoring.grading import selector_status

KIT_TASK = "asyncodebench:cachetools"  # a task of the kit's own published rows (data/<config>/*.parquet)


def run_script(script: str, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT,
               prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, str(ROOT / "scripts" / script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env or script_env())


def no_daemon_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Our own Hugging Face cache and no Docker daemon: whatever the scripts do, they start no container."""
    return script_env({"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock", "HF_HOME": str(tmp_path / "hf"), **extra})


def assert_refused(done: subprocess.CompletedProcess, code: int, *words: str) -> str:
    """Exit `code`, no traceback, exactly one `error:` line, holding every word; returns that line."""
    assert done.returncode == code, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, done.stderr[-3000:]
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


@pytest.fixture()
def preds(tmp_path: Path) -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl([prediction("m", "")]))
    return path


# --- 2. the Hub unreachable -------------------------------------------------------------------------------------


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def hub_down_env(tmp_path: Path) -> dict[str, str]:
    env = no_daemon_env(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}", HF_HUB_ETAG_TIMEOUT="5",
                        HF_HUB_DOWNLOAD_TIMEOUT="5")
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("script", ["evaluate.py", "run_task.py", "check_images.py", "rescore_checkpoints.py"])
def test_an_unreachable_hub_is_one_line_saying_what_to_do_and_exit_3(script: str, hub_down_env: dict[str, str],
                                                                      preds: Path, tmp_path: Path) -> None:
    args = {
        "evaluate.py": [str(preds), "--output-dir", str(tmp_path / "runs")],
        "run_task.py": [KIT_TASK, "--base"],
        "check_images.py": [],
        "rescore_checkpoints.py": [str(preds), "--task", KIT_TASK],
    }[script]
    started = time.monotonic()
    done = run_script(script, *args, env=hub_down_env)
    seconds = time.monotonic() - started
    assert_refused(done, 3, "could not reach the Hugging Face Hub", hub_down_env["HF_ENDPOINT"], "--dataset",
                   "HF_ENDPOINT")
    assert seconds < 20, f"took {seconds:.1f} s: the Hub loader's retries were not avoided"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# --- 3. output folders, dataset folders, checkpoint files -------------------------------------------------------


def test_an_output_dir_that_is_a_file_is_a_bad_argument(preds: Path, offline_demo_dataset: Path,
                                                        tmp_path: Path) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir", str(blocker),
                      "--run-id", "r", env=no_daemon_env(tmp_path))
    assert_refused(done, 2, "--output-dir", str(blocker), "not a folder")
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir",
                      str(blocker / "sub"), "--run-id", "r", env=no_daemon_env(tmp_path))
    assert_refused(done, 2, "--output-dir", "cannot write in")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r").write_text("a file where the run folder goes")
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir",
                      str(tmp_path / "out"), "--run-id", "r", env=no_daemon_env(tmp_path))
    assert_refused(done, 2, str(tmp_path / "out" / "r"), "not a folder")


def test_a_read_only_output_dir_is_a_bad_argument(preds: Path, offline_demo_dataset: Path, tmp_path: Path) -> None:
    """The folder is bind-mounted read-only in a mount namespace of the script's own (the host sees no change)."""
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    mount_ro = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
                'd=$1; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" && exec "$@"', "sh",
                str(read_only))
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir",
                      str(read_only), "--run-id", "r", env=no_daemon_env(tmp_path), prefix=mount_ro)
    assert_refused(done, 2, "--output-dir", "cannot write in", "Read-only file system")
    assert list(read_only.iterdir()) == []


def kit_checkpoints(path: Path, task_id: str = KIT_TASK) -> Path:
    """A valid checkpoint file for a task of the kit's rows: one final checkpoint where every probe passes."""
    rows = load_published(str(ROOT)).rows
    dependencies = [DependencyPoint.from_row(r) for r in rows.dependencies if r["task_id"] == task_id]
    results = {s: selector_status(s, [{"nodeid": s, "outcome": "passed"}], 0, False)
               for s in probe_selectors(dependencies)}
    context = CheckpointContext(
        task_id=task_id, source_task_id=task_id, metric_annotation_id=None, metrics_manifest=None,
        checkpoint_id="final_integrated", checkpoint_type="final_integrated", logical_step=1,
        recorded_at="2026-01-01T00:00:00+00:00", agent_id=None, task_assignment_id=None,
        workspace_kind="integrated_workspace", workspace_path="/testbed", artifact_version=None,
        visible_upstream_artifact_version=None, integrated_workspace_version=None,
        probe_execution_mode="per_selector", probe_timeout_seconds=60, source_build=None)
    record = build_checkpoint_record(context, dependencies, results, {s: 0 for s in results}, "")
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def test_rescore_checkpoints_takes_the_kit_root_or_its_data_folder(tmp_path: Path) -> None:
    checkpoints = kit_checkpoints(tmp_path / "dependency_probe_checkpoints.jsonl")
    outputs = []
    for dataset in (".", "data"):
        done = run_script("rescore_checkpoints.py", str(checkpoints), "--task", KIT_TASK, "--dataset", dataset)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and "T = 1; ADPR = " in outputs[0] and "= 1.000;" in outputs[0]


def test_rescore_checkpoints_says_what_a_dataset_folder_lacks(tmp_path: Path) -> None:
    checkpoints = kit_checkpoints(tmp_path / "dependency_probe_checkpoints.jsonl")
    done = run_script("rescore_checkpoints.py", str(checkpoints), "--task", KIT_TASK, "--dataset", "./no-such-folder",
                      env=no_daemon_env(tmp_path))
    assert_refused(done, 2, "./no-such-folder", "does not exist", "data/<config>/test-*.parquet")
    partial = tmp_path / "partial"
    shutil.copytree(ROOT / "data" / "tasks", partial / "data" / "tasks",
                    ignore=shutil.ignore_patterns("*.yaml", "*.md"))
    done = run_script("rescore_checkpoints.py", str(checkpoints), "--task", KIT_TASK, "--dataset", str(partial),
                      env=no_daemon_env(tmp_path))
    line = assert_refused(done, 2, str(partial), "data/scenarios/test-*.parquet", "data/dependencies/test-*.parquet")
    assert "data/tasks/" not in line
    done = run_script("rescore_checkpoints.py", str(tmp_path / "missing.jsonl"), "--task", KIT_TASK, "--dataset", ".")
    assert_refused(done, 2, "missing.jsonl", "is not a file")


def test_rescore_checkpoints_accepts_a_byte_order_mark_and_refuses_binary_garbage(tmp_path: Path) -> None:
    plain = kit_checkpoints(tmp_path / "plain.jsonl")
    with_bom = tmp_path / "bom.jsonl"
    with_bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    expected = run_script("rescore_checkpoints.py", str(plain), "--task", KIT_TASK, "--dataset", ".")
    done = run_script("rescore_checkpoints.py", str(with_bom), "--task", KIT_TASK, "--dataset", ".")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == expected.stdout
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(bytes(range(256)) * 4)
    done = run_script("rescore_checkpoints.py", str(garbage), "--task", KIT_TASK, "--dataset", ".")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("refused: ") and "line 2: not UTF-8 text (byte 0x80" in line  # byte 10 ends line 1


# --- 4. limits and timeouts -------------------------------------------------------------------------------------


BAD_LIMITS = [("--memory", "0"), ("--memory", "lots"), ("--memory", "1m"), ("--pids", "0"), ("--pids", "-1"),
              ("--pids", "many"), ("--cpus", "0"), ("--cpus", "-1"), ("--cpus", "nan"), ("--cpus", "100000"),
              ("--timeout", "0"), ("--probe-timeout", "-5"), ("--build-timeout", "0"), ("--build-space", "lots"),
              ("--build-space", "1m")]


# run_task.py shares the checks (asyncodebench/cli.py): a few values show it uses them.
CASES = [("evaluate.py", *limit) for limit in BAD_LIMITS] + [
    ("run_task.py", *limit) for limit in (("--memory", "0"), ("--memory", "lots"), ("--pids", "-1"), ("--cpus", "0"),
                                          ("--timeout", "0"))]


@pytest.mark.parametrize("script,flag,value", CASES)
def test_limits_that_would_remove_or_break_a_bound_are_refused_when_parsed(script: str, flag: str, value: str,
                                                                            preds: Path, offline_demo_dataset: Path,
                                                                            tmp_path: Path) -> None:
    args = {"evaluate.py": [str(preds), "--output-dir", str(tmp_path / "runs"), "--run-id", "limits"],
            "run_task.py": [DEMO_TASK_ID, "--base"]}[script]
    done = run_script(script, *args, "--dataset", str(offline_demo_dataset), f"{flag}={value}",
                      env=no_daemon_env(tmp_path))
    assert_refused(done, 2, f"argument {flag}", repr(value))
    assert not (tmp_path / "runs" / "limits").exists()


def test_memory_sizes_are_docker_sizes_in_a_canonical_form() -> None:
    assert [cli.memory_size(v) for v in ("4g", "4096m", "4GB", "1.5g", "512m", "65536k")] == [
        "4g", "4g", "4g", "1536m", "512m", "64m"]
    assert cli.pids("32") == 32 and cli.cpus("0.5") == 0.5


def test_valid_limits_reach_the_report(preds: Path, offline_demo_dataset: Path, tmp_path: Path) -> None:
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir",
                      str(tmp_path / "runs"), "--run-id", "ok", "--memory", "1536M", "--pids", "64", "--cpus", "0.5",
                      env=no_daemon_env(tmp_path))
    assert done.returncode == 3, done.stderr[-3000:]  # no daemon: an infrastructure error, reported
    limits = json.loads((tmp_path / "runs" / "ok" / "report.json").read_text())["run"]["settings"]["limits"]
    assert (limits["memory"], limits["pids"], limits["cpus"]) == ("1536m", 64, 0.5)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_check_images_refuses_a_registry_timeout_that_is_not_above_0(value: str, offline_demo_dataset: Path) -> None:
    done = run_script("check_images.py", "--dataset", str(offline_demo_dataset), "--registry", f"--timeout={value}")
    assert_refused(done, 2, "argument --timeout", "above 0")
    assert "did not answer" not in done.stdout


# --- 5. nothing to do -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"\xef\xbb\xbf", b"[]"])
def test_an_empty_predictions_file_says_so_and_exits_1(content: bytes, offline_demo_dataset: Path,
                                                       tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(content)
    done = run_script("evaluate.py", str(empty), "--dataset", str(offline_demo_dataset), "--output-dir",
                      str(tmp_path / "runs"), "--run-id", "empty", env=no_daemon_env(tmp_path))
    assert_refused(done, 1, str(empty), "holds no predictions", "nothing to evaluate")
    assert not (tmp_path / "runs" / "empty").exists()


def test_rescore_of_a_run_that_never_ran_says_so_and_exits_2(preds: Path, offline_demo_dataset: Path,
                                                             tmp_path: Path) -> None:
    base = ("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir", str(tmp_path / "runs"))
    done = run_script(*base, "--run-id", "never", "--rescore", env=no_daemon_env(tmp_path))
    assert_refused(done, 2, "--rescore", "there is no run folder", str(tmp_path / "runs" / "never"))
    assert not (tmp_path / "runs" / "never").exists()
    # A run whose every prediction met a stopped daemon has nothing to regrade either.
    assert run_script(*base, "--run-id", "no-daemon", env=no_daemon_env(tmp_path)).returncode == 3
    done = run_script(*base, "--run-id", "no-daemon", "--rescore", env=no_daemon_env(tmp_path))
    assert_refused(done, 2, "--rescore", "holds no evaluated prediction")


# --- 7. run ids -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["a/b", "../escaped", "/tmp/asyncodebench-abs-run", ".hidden", "-dash", "",
                                    "x" * 101, "a b"])
def test_a_run_id_that_is_not_a_plain_folder_name_is_refused(run_id: str, preds: Path, offline_demo_dataset: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "sub" / "runs"
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir", str(out),
                      f"--run-id={run_id}", env=no_daemon_env(tmp_path))
    assert_refused(done, 2, "argument --run-id", "letters, digits")
    assert not (tmp_path / "sub" / "escaped").exists() and not Path("/tmp/asyncodebench-abs-run").exists()
    assert not out.exists() or not any(out.iterdir())


# --- 11 and 12. where the rows came from; one progress display --------------------------------------------------


def test_a_local_dataset_is_named_as_a_folder_with_a_content_digest_and_loads_without_progress_bars(
        preds: Path, offline_demo_dataset: Path, tmp_path: Path) -> None:
    """A local folder is read with pyarrow: nothing lands in the Hugging Face cache and no bar but the run's own."""
    done = run_script("evaluate.py", str(preds), "--dataset", str(offline_demo_dataset), "--output-dir",
                      str(tmp_path / "runs"), "--run-id", "local", env=no_daemon_env(tmp_path))
    assert done.returncode == 3, done.stderr[-3000:]
    assert not (tmp_path / "hf").exists()  # the (fresh) Hugging Face cache was never touched
    assert "Generating test split" not in done.stderr
    bars = [part for part in done.stderr.replace("\r", "\n").splitlines() if "%|" in part or "/s]" in part]
    assert bars and all(part.startswith("evaluating") for part in bars), bars
    dataset = json.loads((tmp_path / "runs" / "local" / "report.json").read_text())["run"]["dataset"]
    assert dataset["source"] == "local_folder" and dataset["id"] == str(offline_demo_dataset.resolve())
    assert dataset["revision"] is None and dataset["resolved_commit"] is None
    assert dataset["content_sha256"].startswith("sha256:")
    header = (tmp_path / "runs" / "local" / "report.md").read_text().splitlines()[2]
    assert header.startswith(f"Dataset: local folder `{offline_demo_dataset.resolve()}` (content digest of its "
                             f"Parquet files `{dataset['content_sha256']}`)")
    assert "None" not in header and "commit" not in header


def test_a_hub_dataset_is_named_with_its_revision_and_resolved_commit() -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    text = dataset_source({"source": "hub", "id": "PhilipZhang/AsynCodeBench", "revision": "v0.4.2",
                           "resolved_commit": commit, "content_sha256": None})
    assert text == f"Dataset: Hub `PhilipZhang/AsynCodeBench` at revision `v0.4.2` (resolved commit `{commit}`)"


@pytest.mark.docker
def test_a_base_image_that_cannot_be_pulled_suggests_the_local_base(tmp_path: Path) -> None:
    """Without Docker Hub the default base (python:<version>-slim) cannot be pulled: the error says to build on the
    local base, not that a pip pin is wrong, and comes before the repository is fetched (--repo names none here)."""
    done = run_script("build_task_image.py", DEMO_TASK_ID, "--repo", str(tmp_path / "no-such-repo.git"),
                      "--base", "127.0.0.1:9/asyncodebench/no-such-base:1", "--push", "127.0.0.1:9",
                      "--map", str(tmp_path / "map.json"))
    assert done.returncode == cli.EXIT_INFRASTRUCTURE and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: docker pull of the base image 127.0.0.1:9/asyncodebench/no-such-base:1 "
                                  "failed"), done.stderr
    assert "add --base local" in done.stderr and "pip" not in done.stderr, done.stderr
    assert not (tmp_path / "map.json").exists()
