"""eval.yaml declares the benchmark as the Hub stands, and scripts/publish_results.py turns a complete, official run
into a model repo's `.eval_results/` files, through huggingface_hub's own types, checked against the release read from
a real local Hub mirror (olah): printed by default, written with --output-dir, served back by the mirror; anything
partial or unofficial is refused with what to do.

The complete run is a release-size synthetic report (reports/synthetic.py) moved onto the release's own task ids,
images and commit: a real run of 19 tasks x 5 protocols cannot run here, and every check reads only report.json.
Docker-free."""

from __future__ import annotations

import getpass
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.checkout import script_env
from huggingface_hub import eval_result_entries_to_yaml, parse_eval_result_entries

from asyncodebench.dataset import hub_mirror
from asyncodebench.dataset.protocols import PROTOCOLS
from asyncodebench.dataset.publish import assemble
from asyncodebench.dataset.rows import DEFAULT_DATASET, load_published
from asyncodebench.reports.eval_results import build_files, source_url, validate_results
from asyncodebench.reports.report import build_report
from asyncodebench.reports.synthetic import synthetic_inputs, typed_results

pytestmark = pytest.mark.mirror
ROOT = Path(__file__).resolve().parent.parent
MODEL_REPO = "demo-org/demo-gold-agent"
MODEL = "synth-model-a"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
GOLD_FILE = ".eval_results/asyncodebench_single.yaml"
# huggingface.js packages/tasks/src/eval.ts, EVALUATION_FRAMEWORKS, as read for this release: the names eval.yaml
# may give as `evaluation_framework` (asyncodebench is not one yet; docs/evaluate.md).
HUB_FRAMEWORKS = {"exgentic", "inspect-ai", "math-arena", "mteb", "olmocr-bench", "harbor", "archipelago",
                  "apex-evals", "screenspot-pro", "swe-bench", "swe-bench-pro", "nemo-evaluator", "yc-bench",
                  "open-asr-leaderboard", "mdpbench", "parsebench", "video-mme-v2", "claw-eval", "wildclawbench"}
DOCUMENTED = {"dataset", "value", "verifyToken", "date", "source", "notes"}  # hub-docs eval_results.yaml


def publish_results(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "scripts/publish_results.py", *args], cwd=ROOT, env=env or script_env(),
                          capture_output=True, text=True, timeout=120, check=False)


def offline_env(tmp_path: Path, endpoint: str = "http://127.0.0.1:9") -> dict[str, str]:
    """No token and an endpoint where nothing listens: any attempt to reach a Hub would fail loudly."""
    env = {k: v for k, v in script_env().items() if k != "HF_TOKEN"}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
    return env


def test_eval_yaml_declares_one_task_per_protocol_on_the_scenarios_config_valid_for_the_hub() -> None:
    declared = yaml.safe_load((ROOT / "eval.yaml").read_text(encoding="utf-8"))
    assert {"name", "description", "tasks"} <= declared.keys()
    # valid as the Hub stands: a framework name only from its list (asyncodebench needs registering first)
    assert declared.get("evaluation_framework", "inspect-ai") in HUB_FRAMEWORKS
    assert [t["id"] for t in declared["tasks"]] == list(PROTOCOLS)
    assert all(t["config"] == "scenarios" and t["split"] == "test" for t in declared["tasks"])
    assert "https://huggingface.co/docs/hub/eval-results" in (ROOT / "eval.yaml").read_text(encoding="utf-8")


def test_the_hub_folder_carries_eval_yaml_at_its_root(tmp_path: Path) -> None:
    assemble(tmp_path / "hub")
    assert (tmp_path / "hub" / "eval.yaml").read_bytes() == (ROOT / "eval.yaml").read_bytes()


@dataclass
class ReleaseHub:
    """The release committed to an olah mirror and served for the module."""

    endpoint: str
    commit: str
    mirrors: Path
    hf_home: Path
    content_sha256: str


@pytest.fixture(scope="module")
def release_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReleaseHub]:
    work = tmp_path_factory.mktemp("release_hub")
    assemble(work / "release")
    commit = hub_mirror.commit_revision(work / "mirrors" / "datasets" / DEFAULT_DATASET, work / "release", "v0.4.2")
    digest = load_published(str(work / "release")).content_digest or ""
    with hub_mirror.serve(work / "mirrors", DEFAULT_DATASET) as mirror:
        yield ReleaseHub(mirror.endpoint, commit, work / "mirrors", work / "hf", digest)


def hub_env(hub: ReleaseHub, endpoint: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in script_env().items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    env.update(HF_ENDPOINT=endpoint or hub.endpoint, HF_HOME=str(hub.hf_home), HF_HUB_DISABLE_TELEMETRY="1")
    return env


def complete_report(commit: str, run_id: str = "complete-run") -> dict[str, Any]:
    """A release-size report of one model, every release task under every protocol, on the release's images and
    official settings, read from the Hub at `commit`."""
    rows = load_published(str(ROOT)).rows
    ids = sorted(t["task_id"] for t in rows.tasks)
    pinned = {t["task_id"]: t["container_pinned_ref"] for t in rows.tasks}
    metadata, file, results = synthetic_inputs(tasks=len(ids), models=(MODEL,), infrastructure_errors=0,
                                               run_id=run_id)
    rename = {f"synthetic:task{n:02d}": task for n, task in enumerate(ids)}
    for result in results:
        result["task_id"] = rename[result["task_id"]]
    file = replace(file, predictions=tuple(replace(p, task_id=rename[p.task_id]) for p in file.predictions))
    metadata.update(
        dataset={"source": "hub", "id": DEFAULT_DATASET, "revision": "v0.4.2", "resolved_commit": commit,
                 "content_sha256": None},
        settings={"run_probes": True, "timeout_seconds": 900, "probe_timeout_seconds": 60, "mode": "evaluate"},
        images={t: {"task_id": t, "pinned_ref": pinned[t], "state": "match"} for t in ids},
        image_sources={t: {"pinned_ref": pinned[t], "provenance": "official"} for t in ids},
        dependency_points={k: {**v, "task_id": rename[v["task_id"]]} for k, v in metadata["dependency_points"].items()},
        tool={"name": "asyncodebench", "version": "0.4.2", "python": "3.11.9"})
    return build_report(metadata, file, typed_results(results))


def run_folder(where: Path, report: dict[str, Any]) -> Path:
    where.mkdir(parents=True)
    (where / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return where


def fsr(report: dict[str, Any], protocol: str) -> float:
    (row,) = [r for r in report["summary"] if r["model_name_or_path"] == MODEL and r["protocol"] == protocol]
    return float(round(row["fsr"]["mean"] * 100, 2))


def printed_files(stdout: str) -> dict[str, str]:
    """The files a dry run printed, by path."""
    parts = stdout.split("\n--- ") if not stdout.startswith("--- ") else ("\n" + stdout).split("\n--- ")
    files = {}
    for part in parts[1:]:
        path, _, text = part.partition("\n")
        files[path] = text.split("\ndry run")[0].split("\nNOT PUBLISHABLE")[0]
    return files


def test_a_complete_run_prints_results_that_round_trip_through_huggingface_hub(release_hub: ReleaseHub,
                                                                                tmp_path: Path) -> None:
    report = complete_report(release_hub.commit)
    done = publish_results(str(run_folder(tmp_path / "run", report)), "--model-repo", MODEL_REPO,
                           env=hub_env(release_hub))
    assert done.returncode == 0, done.stderr
    assert "would commit" in done.stdout and "--push" in done.stdout
    files = printed_files(done.stdout)
    results = {path: text for path, text in files.items() if path.startswith(".eval_results/")}
    assert sorted(results) == sorted(f".eval_results/asyncodebench_{p}.yaml" for p in PROTOCOLS)
    provenance_path = f"asyncodebench_runs/{report['run']['run_id']}.json"
    for path, text in results.items():
        data = yaml.safe_load(text)
        validate_results(data)
        (entry,) = parse_eval_result_entries(data)
        assert eval_result_entries_to_yaml([entry]) == data  # the library's reader and writer give it back whole
        assert set(data[0]) <= DOCUMENTED
        assert entry.dataset_id == DEFAULT_DATASET and entry.dataset_revision == release_hub.commit
        assert entry.value == fsr(report, entry.task_id) and path.endswith(f"_{entry.task_id}.yaml")
        assert entry.source_url == f"{release_hub.endpoint}/{MODEL_REPO}/blob/main/{provenance_path}"
        assert "over 19 tasks" in (entry.notes or "") and "kit 0.4.2" in (entry.notes or "")
    provenance = json.loads(files[provenance_path])
    assert set(provenance["images"].values()) == {i["pinned_ref"] for i in report["run"]["images"].values()}
    assert provenance["dataset"]["revision"] == release_hub.commit


def test_written_files_are_served_back_by_the_hub_mirror_beside_the_dataset_eval_yaml(
        release_hub: ReleaseHub, tmp_path: Path) -> None:
    """The mirror cannot take an upload (olah serves git repositories read-only), so the files are written into the
    model repo's checkout, committed there, and read back through huggingface_hub from the served mirror."""
    report = complete_report(release_hub.commit)
    model_dir = tmp_path / "model"
    done = publish_results(str(run_folder(tmp_path / "run", report)), "--model-repo", MODEL_REPO,
                           "--output-dir", str(model_dir), env=hub_env(release_hub))
    assert done.returncode == 0, done.stderr
    hub_mirror.commit_revision(release_hub.mirrors / "models" / MODEL_REPO, model_dir, "results")
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
    with hub_mirror.serve(release_hub.mirrors, DEFAULT_DATASET) as mirror:  # a fresh one sees the new model repo
        read = subprocess.run([sys.executable, "-c", reader], env=hub_env(release_hub, mirror.endpoint),
                              capture_output=True, text=True, timeout=120, check=False)
    assert read.returncode == 0, read.stderr
    back = json.loads(read.stdout.splitlines()[-1])
    assert back == {"task_id": "single", "value": fsr(report, "single"), "revision": release_hub.commit,
                    "tasks": list(PROTOCOLS)}


def test_nothing_written_names_a_local_path_the_host_or_the_user(release_hub: ReleaseHub, tmp_path: Path) -> None:
    """A run on a local folder holding the release's own rows is publishable; its folder's path stays out."""
    report = complete_report(release_hub.commit)
    secret = tmp_path / "home-of-someone" / "private-dataset-folder"
    report["run"]["dataset"] = {"source": "local_folder", "id": str(secret), "revision": None,
                                "resolved_commit": None, "content_sha256": release_hub.content_sha256}
    report["run"]["run_folder"] = str(tmp_path / "run")
    out = tmp_path / "model"
    args = (str(run_folder(tmp_path / "run", report)), "--model-repo", MODEL_REPO, "--dataset", DEFAULT_DATASET,
            "--revision", release_hub.commit)
    printed = publish_results(*args, env=hub_env(release_hub))
    written = publish_results(*args, "--output-dir", str(out), env=hub_env(release_hub))
    assert printed.returncode == 0 and written.returncode == 0, printed.stderr + written.stderr
    texts = [printed_files(printed.stdout)[p] for p in printed_files(printed.stdout)]
    texts += [f.read_text(encoding="utf-8") for f in out.rglob("*") if f.is_file()]
    assert len(texts) == 2 * (len(PROTOCOLS) + 1)
    forbidden = [str(tmp_path), "home-of-someone", getpass.getuser(), socket.gethostname()]
    for text in texts:
        for word in forbidden:
            assert len(word) < 4 or word not in text, (word, text[:200])


def _missing_task(report: dict[str, Any]) -> None:
    gone = next(p for p in report["predictions"] if p["protocol"] == "async_private")
    report["predictions"].remove(gone)


def _infrastructure_error(report: dict[str, Any]) -> None:
    row = next(p for p in report["predictions"] if p["protocol"] == "single")
    kept = {k: row[k] for k in ("task_id", "protocol", "model_name_or_path", "prediction_run_id", "line")}
    row.clear()
    row.update(kept, status="infrastructure_error", infrastructure_error={"kind": "image_missing", "message": "gone"})


def _other_commit(report: dict[str, Any]) -> None:
    report["run"]["dataset"]["resolved_commit"] = COMMIT


def _offline_rows(report: dict[str, Any]) -> None:
    report["run"]["dataset"]["resolved_commit"] = None


def _other_local_rows(report: dict[str, Any]) -> None:
    report["run"]["dataset"] = {"source": "local_folder", "id": "/data/x", "revision": None, "resolved_commit": None,
                                "content_sha256": "sha256:" + "1" * 64}


def _unpinned_image(report: dict[str, Any]) -> None:
    info = next(iter(report["run"]["images"].values()))
    info["pinned_ref"] = info["pinned_ref"].split("@")[0] + "@sha256:" + "2" * 64


def _rebuilt_image(report: dict[str, Any]) -> None:
    report["predictions"][0]["image_provenance"] = "rebuilt"


def _short_timeout(report: dict[str, Any]) -> None:
    report["run"]["settings"]["timeout_seconds"] = 60


def _no_probes(report: dict[str, Any]) -> None:
    report["run"]["settings"]["run_probes"] = False


def _task_outside_the_release(report: dict[str, Any]) -> None:
    report["predictions"][0]["task_id"] = "asyncodebench-demo:tiny"


@pytest.mark.parametrize(("change", "reason"), [
    (_missing_task, "1 of the release's 19 tasks were not scored"), (_infrastructure_error, "infrastructure error"),
    (_other_commit, f"@{COMMIT}, not"), (_offline_rows, "offline"), (_other_local_rows, "local rows"),
    (_unpinned_image, "pinned image"), (_rebuilt_image, "rebuilt images"), (_short_timeout, "timeout_seconds=60"),
    (_no_probes, "run_probes=False"), (_task_outside_the_release, "not in the release"),
], ids=lambda v: v.__name__.strip("_") if callable(v) else "")
def test_a_partial_or_unofficial_run_is_refused_with_the_command_to_complete_it(
        release_hub: ReleaseHub, tmp_path: Path, change: Callable[[dict[str, Any]], None], reason: str) -> None:
    report = complete_report(release_hub.commit)
    change(report)
    out = tmp_path / "model"
    run = run_folder(tmp_path / "run", report)
    args = [str(run), "--model-repo", MODEL_REPO, "--dataset", DEFAULT_DATASET, "--revision",
            release_hub.commit]
    done = publish_results(*args, "--output-dir", str(out), env=hub_env(release_hub))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not a complete, official run" in done.stderr and reason in done.stderr, done.stderr
    assert "python scripts/evaluate.py" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()
    # --allow-partial shows the files, marked, and is for a dry run only
    shown = publish_results(*args, "--allow-partial", env=hub_env(release_hub))
    assert shown.returncode == 0, shown.stderr
    assert "NOT PUBLISHABLE" in shown.stdout and reason in shown.stdout and "would commit" not in shown.stdout
    refused = publish_results(*args, "--output-dir", str(out), "--allow-partial", env=hub_env(release_hub))
    assert refused.returncode == 2 and "dry run only" in refused.stderr and not out.exists()


def test_an_unreachable_hub_is_an_infrastructure_error_not_a_pass(release_hub: ReleaseHub, tmp_path: Path) -> None:
    run = run_folder(tmp_path / "run", complete_report(release_hub.commit))
    # an empty cache: a commit already downloaded is read from the cache, as huggingface_hub does offline
    env = {**hub_env(release_hub, "http://127.0.0.1:9"), "HF_HOME": str(tmp_path / "hf")}
    done = publish_results(str(run), "--model-repo", MODEL_REPO, env=env)
    assert done.returncode == 3, done.stderr
    assert "http://127.0.0.1:9" in done.stderr and "Traceback" not in done.stderr
    unknown = publish_results(str(run), "--model-repo", MODEL_REPO, "--revision", COMMIT,
                              env=hub_env(release_hub))
    assert unknown.returncode == 2 and COMMIT in unknown.stderr, unknown.stderr


def test_a_run_on_a_local_folder_needs_the_hub_dataset_and_its_commit(release_hub: ReleaseHub,
                                                                     tmp_path: Path) -> None:
    report = complete_report(release_hub.commit)
    _other_local_rows(report)
    run = str(run_folder(tmp_path / "run", report))
    done = publish_results(run, "--model-repo", MODEL_REPO, env=hub_env(release_hub))
    assert done.returncode == 2
    assert "--dataset" in done.stderr and "--revision" in done.stderr
    tag = publish_results(run, "--model-repo", MODEL_REPO, "--dataset", DEFAULT_DATASET, "--revision",
                          "v0.4.2", env=hub_env(release_hub))
    assert tag.returncode == 2 and "40-hex commit" in tag.stderr


def test_a_run_with_several_models_needs_model_and_names_them(tmp_path: Path) -> None:
    metadata, file, results = synthetic_inputs(tasks=2, models=("m-one", "m-two"), points=2, infrastructure_errors=0)
    run = run_folder(tmp_path / "run", build_report(metadata, file, typed_results(results)))
    done = publish_results(str(run), "--model-repo", MODEL_REPO, env=offline_env(tmp_path))
    assert done.returncode == 2
    assert "--model" in done.stderr and "m-one" in done.stderr and "m-two" in done.stderr


def test_a_missing_or_malformed_model_repo_is_refused(tmp_path: Path) -> None:
    run = run_folder(tmp_path / "run", complete_report(COMMIT))
    missing = publish_results(str(run), env=offline_env(tmp_path))
    assert missing.returncode == 2 and "--model-repo" in missing.stderr
    bad = publish_results(str(run), "--model-repo", "no slash here", env=offline_env(tmp_path))
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


def test_push_without_a_token_exits_2_and_names_both_ways_to_give_one(tmp_path: Path) -> None:
    run = run_folder(tmp_path / "run", complete_report(COMMIT))
    done = publish_results(str(run), "--model-repo", MODEL_REPO, "--push", env=offline_env(tmp_path))
    assert done.returncode == 2
    assert "hf auth login" in done.stderr and "HF_TOKEN" in done.stderr and "dry run" in done.stderr
    no_push = publish_results(str(run), "--model-repo", MODEL_REPO, "--create-pr", env=offline_env(tmp_path))
    assert no_push.returncode == 2 and "--push" in no_push.stderr


def test_the_token_hf_auth_login_saved_is_used_and_a_refused_push_exits_3(release_hub: ReleaseHub,
                                                                         tmp_path: Path) -> None:
    """No HF_TOKEN, only the token file `hf auth login` writes: the push is tried (the read-only mirror refuses
    it: exit 3), where a missing token would be exit 2."""
    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    (hf_home / "token").write_text("hf_not_a_real_token", encoding="utf-8")
    env = {**hub_env(release_hub), "HF_HOME": str(hf_home)}
    run = run_folder(tmp_path / "run", complete_report(release_hub.commit))
    done = publish_results(str(run), "--model-repo", MODEL_REPO, "--push", env=env)
    assert done.returncode == 3, done.stderr
    assert release_hub.endpoint in done.stderr and MODEL_REPO in done.stderr and "Traceback" not in done.stderr


def test_source_url_names_where_the_provenance_is_main_or_the_pull_requests_ref() -> None:
    report = complete_report(COMMIT)
    path = f"asyncodebench_runs/{report['run']['run_id']}.json"
    assert source_url("https://huggingface.co/", MODEL_REPO, "main", path) == \
        f"https://huggingface.co/{MODEL_REPO}/blob/main/{path}"
    files = build_files(report, MODEL_REPO, "https://huggingface.co", repo_revision="refs/pr/7")
    urls = {entry.source_url for f in files if f.path.endswith(".yaml")
            for entry in parse_eval_result_entries(yaml.safe_load(f.text))}
    assert urls == {f"https://huggingface.co/{MODEL_REPO}/blob/refs%2Fpr%2F7/{path}"}
    assert path in {f.path for f in files}


def test_a_value_out_of_range_or_an_unknown_task_fails_validation() -> None:
    entry = {"dataset": {"id": DEFAULT_DATASET, "task_id": "single", "revision": COMMIT}, "value": 0.5}
    validate_results([entry])
    with pytest.raises(ValueError, match="value"):
        validate_results([{**entry, "value": 150}])
    with pytest.raises(ValueError, match="task_id"):
        validate_results([{**entry, "dataset": {**entry["dataset"], "task_id": "pairs"}}])


def test_the_old_flag_names_keep_working_for_one_release_with_a_warning(release_hub: ReleaseHub,
                                                                        tmp_path: Path) -> None:
    report = complete_report(release_hub.commit)
    _other_local_rows(report)
    report["run"]["dataset"]["content_sha256"] = release_hub.content_sha256
    out = tmp_path / "model"
    done = publish_results(str(run_folder(tmp_path / "run", report)), "--model-repo", MODEL_REPO, "--dataset-id",
                           DEFAULT_DATASET, "--dataset-revision", release_hub.commit, "--out", str(out),
                           env=hub_env(release_hub))
    assert done.returncode == 0, done.stderr
    assert (out / GOLD_FILE).is_file()
    for old, new in (("--dataset-id", "--dataset"), ("--dataset-revision", "--revision"), ("--out", "--output-dir")):
        assert f"warning: {old} is deprecated and goes in the next release; use {new}" in done.stderr


def test_help_shows_the_defaults_and_not_the_old_names() -> None:
    done = publish_results("--help")
    assert done.returncode == 0
    assert "--output-dir" in done.stdout and "(default: None)" in done.stdout
    assert "--dataset-id" not in done.stdout and "--out " not in done.stdout
