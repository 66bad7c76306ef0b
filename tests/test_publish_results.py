"""eval.yaml declares the benchmark as the Hub documents it, and scripts/publish_results.py turns a real demo run into
a model repo's `.eval_results/` files: printed by default, written with --out, served back by the local Hub mirror,
and refused with what to do when the input is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.demo_run import EvalRun

from asyncodebench.dataset import hub_mirror
from asyncodebench.dataset.protocols import PROTOCOLS
from asyncodebench.dataset.publish import assemble
from asyncodebench.dataset.rows import DEFAULT_DATASET
from asyncodebench.reports.eval_results import validate_results

ROOT = Path(__file__).resolve().parent.parent
MODEL_REPO = "demo-org/demo-gold-agent"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
LOCAL_FLAGS = ("--model", "demo-gold", "--dataset-id", DEFAULT_DATASET, "--dataset-revision", COMMIT)
GOLD_FILE = ".eval_results/asyncodebench_single.yaml"


def publish_results(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "scripts/publish_results.py", *args], cwd=ROOT, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)


def offline_env(tmp_path: Path, endpoint: str = "http://127.0.0.1:9") -> dict[str, str]:
    """No token and an endpoint where nothing listens: any attempt to reach a Hub would fail loudly."""
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
    return env


def test_eval_yaml_declares_one_task_per_protocol_on_the_scenarios_config() -> None:
    declared = yaml.safe_load((ROOT / "eval.yaml").read_text(encoding="utf-8"))
    assert {"name", "description", "evaluation_framework", "tasks"} <= declared.keys()
    assert declared["evaluation_framework"] == "asyncodebench"
    assert [t["id"] for t in declared["tasks"]] == list(PROTOCOLS)
    assert all(t["config"] == "scenarios" and t["split"] == "test" for t in declared["tasks"])
    assert "https://huggingface.co/docs/hub/eval-results" in (ROOT / "eval.yaml").read_text(encoding="utf-8")


def test_the_hub_folder_carries_eval_yaml_at_its_root(tmp_path: Path) -> None:
    assemble(tmp_path / "hub")
    assert (tmp_path / "hub" / "eval.yaml").read_bytes() == (ROOT / "eval.yaml").read_bytes()


def test_dry_run_prints_one_valid_results_file_with_fsr_revision_kit_and_images(
        shared_demo_run: EvalRun, tmp_path: Path) -> None:
    done = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, *LOCAL_FLAGS,
                           env=offline_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "dry run" in done.stdout and "--push" in done.stdout
    text = done.stdout.split(f"--- {GOLD_FILE}\n")[1].split("\n--- ")[0]
    entries = yaml.safe_load(text)
    validate_results(entries)
    (entry,) = entries
    report = shared_demo_run.report
    assert entry["dataset"] == {"id": DEFAULT_DATASET, "task_id": "single", "revision": COMMIT}
    assert entry["value"] == 100.0  # the gold patch passes the demo task
    assert entry["evaluation_framework"] == "asyncodebench"
    assert f"kit {report['run']['tool']['version']}" in entry["notes"]
    assert f"run {report['run']['run_id']}" in entry["notes"]
    assert entry["date"] == report["run"]["finished_at"][:10]
    provenance_path = f"asyncodebench_runs/{report['run']['run_id']}.json"
    assert entry["source"]["url"].endswith(f"/{MODEL_REPO}/blob/main/{provenance_path}")
    provenance = json.loads(done.stdout.split(f"--- {provenance_path}\n")[1].split("dry run:")[0])
    assert set(provenance["images"].values()) == {i["pinned_ref"] for i in report["run"]["images"].values()}
    assert provenance["image_set_sha256"] in entry["notes"]
    assert not (tmp_path / "hf").exists() or not any((tmp_path / "hf").rglob("*.yaml"))


def test_written_files_are_served_back_by_the_hub_mirror_beside_the_dataset_eval_yaml(
        shared_demo_run: EvalRun, tmp_path: Path) -> None:
    """The mirror cannot take an upload (olah serves git repositories read-only), so the files are written into the
    model repo's checkout, committed there, and read back through huggingface_hub from the served mirror."""
    mirrors = tmp_path / "mirrors"
    assemble(tmp_path / "release")
    dataset_commit = hub_mirror.commit_revision(mirrors / "datasets" / DEFAULT_DATASET, tmp_path / "release", "v0.4.2")
    model_dir = tmp_path / "model"
    done = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, "--model", "demo-gold",
                           "--dataset-id", DEFAULT_DATASET, "--dataset-revision", dataset_commit,
                           "--out", str(model_dir), env=offline_env(tmp_path))
    assert done.returncode == 0, done.stderr
    hub_mirror.commit_revision(mirrors / "models" / MODEL_REPO, model_dir, "results")
    reader = f"""
import json, yaml
from huggingface_hub import hf_hub_download, parse_eval_result_entries
results = yaml.safe_load(open(hf_hub_download({MODEL_REPO!r}, {GOLD_FILE!r})))
(entry,) = parse_eval_result_entries(results)
declared = yaml.safe_load(open(hf_hub_download(entry.dataset_id, "eval.yaml", repo_type="dataset",
                                               revision=entry.dataset_revision)))
print(json.dumps({{"task_id": entry.task_id, "value": entry.value, "revision": entry.dataset_revision,
                  "tasks": [t["id"] for t in declared["tasks"]]}}))
"""
    with hub_mirror.serve(mirrors, DEFAULT_DATASET) as mirror:
        read = subprocess.run([sys.executable, "-c", reader], env=offline_env(tmp_path, mirror.endpoint),
                              capture_output=True, text=True, timeout=120, check=False)
    assert read.returncode == 0, read.stderr
    back = json.loads(read.stdout.splitlines()[-1])
    assert back == {"task_id": "single", "value": 100.0, "revision": dataset_commit, "tasks": list(PROTOCOLS)}


def test_a_run_on_a_local_folder_needs_the_hub_dataset_and_its_commit(shared_demo_run: EvalRun,
                                                                     tmp_path: Path) -> None:
    done = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, "--model", "demo-gold",
                           env=offline_env(tmp_path))
    assert done.returncode == 2
    assert "--dataset-id" in done.stderr and "--dataset-revision" in done.stderr
    tag = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, "--model", "demo-gold",
                          "--dataset-id", DEFAULT_DATASET, "--dataset-revision", "v0.4.2", env=offline_env(tmp_path))
    assert tag.returncode == 2 and "40-hex commit" in tag.stderr


def test_a_run_with_several_models_needs_model_and_names_them(shared_demo_run: EvalRun, tmp_path: Path) -> None:
    done = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, "--dataset-id",
                           DEFAULT_DATASET, "--dataset-revision", COMMIT, env=offline_env(tmp_path))
    assert done.returncode == 2
    assert "--model" in done.stderr and "demo-gold" in done.stderr


def test_a_missing_or_malformed_model_repo_is_refused(shared_demo_run: EvalRun, tmp_path: Path) -> None:
    missing = publish_results(str(shared_demo_run.run_dir), *LOCAL_FLAGS, env=offline_env(tmp_path))
    assert missing.returncode == 2 and "--model-repo" in missing.stderr
    bad = publish_results(str(shared_demo_run.run_dir), "--model-repo", "no slash here", *LOCAL_FLAGS,
                          env=offline_env(tmp_path))
    assert bad.returncode == 2 and "ORG/NAME" in bad.stderr


def test_a_folder_that_is_no_run_and_an_unfinished_run_say_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = publish_results(str(tmp_path / "empty"), "--model-repo", MODEL_REPO, env=offline_env(tmp_path))
    assert done.returncode == 2 and "not a run folder" in done.stderr and "evaluate.py" in done.stderr
    unfinished = tmp_path / "unfinished"
    (unfinished / "predictions").mkdir(parents=True)
    (unfinished / "settings.json").write_text("{}", encoding="utf-8")
    done = publish_results(str(unfinished), "--model-repo", MODEL_REPO, env=offline_env(tmp_path))
    assert done.returncode == 2 and "not finished" in done.stderr and "--run-id" in done.stderr


def test_push_without_a_token_exits_2_and_writes_nothing(shared_demo_run: EvalRun, tmp_path: Path) -> None:
    done = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, *LOCAL_FLAGS, "--push",
                           env=offline_env(tmp_path))
    assert done.returncode == 2
    assert "HF_TOKEN" in done.stderr and "dry run" in done.stderr


def test_push_to_an_unreachable_hub_exits_3_and_names_the_endpoint(shared_demo_run: EvalRun, tmp_path: Path) -> None:
    env = {**offline_env(tmp_path), "HF_TOKEN": "hf_not_a_real_token"}
    done = publish_results(str(shared_demo_run.run_dir), "--model-repo", MODEL_REPO, *LOCAL_FLAGS, "--push", env=env)
    assert done.returncode == 3, done.stderr
    assert "http://127.0.0.1:9" in done.stderr and MODEL_REPO in done.stderr


def test_a_value_out_of_range_or_an_unknown_task_fails_validation() -> None:
    entry = {"dataset": {"id": DEFAULT_DATASET, "task_id": "single", "revision": COMMIT}, "value": 0.5}
    validate_results([entry])
    with pytest.raises(ValueError, match="value"):
        validate_results([{**entry, "value": 150}])
    with pytest.raises(ValueError, match="task_id"):
        validate_results([{**entry, "dataset": {**entry["dataset"], "task_id": "pairs"}}])
