"""The embedded demo task keeps its promises: the base fails, gold passes, partial splits the probes,
the data files agree with each other, and the image pins the same base commit the row names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from asyncodebench.harness.integration import INTEGRATED_PROTOCOLS
from asyncodebench.images import demo as demo_image
from asyncodebench.images.demo import DEMO_DIR, make_base_repo
from asyncodebench.images.registry import registry_port_from_env

TASK = yaml.safe_load((DEMO_DIR / "task.yaml").read_text())
PATCHES = DEMO_DIR / "patches"
PREDICTIONS = DEMO_DIR / "predictions"
UNSAFE_PATH_PREDICTIONS = {"hostile-dotdot-path", "hostile-absolute-path"}


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)


def _apply(repo: Path, patch: str, check_only: bool = False) -> subprocess.CompletedProcess:
    args = ["apply", "--check", "-"] if check_only else ["apply", "-"]
    return subprocess.run(["git", "-C", str(repo), *args], input=patch, capture_output=True, text=True, check=False)


def _outcomes(repo: Path) -> dict[str, str]:
    """Run the task's evaluator command plus a JSON report; map node id -> outcome."""
    report = repo.parent / f"{repo.name}-report.json"
    command = [sys.executable if arg in ("python", "python3") else arg for arg in TASK["evaluator_command"]]
    command[-1:-1] = ["--json-report", f"--json-report-file={report}"]
    subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=300, check=False)
    data = json.loads(report.read_text())
    return {test["nodeid"]: test["outcome"] for test in data["tests"]}


def _counts(outcomes: dict[str, str]) -> dict[str, int]:
    values = list(outcomes.values())
    return {"collected": len(values), "passed": values.count("passed"), "failed": values.count("failed"),
            "errors": values.count("error"), "skipped": values.count("skipped")}


def _snapshot(snapshot_id: str) -> dict[str, int]:
    (snapshot,) = [s for s in TASK["expected_test_counts"] if s["snapshot_id"] == snapshot_id]
    return {key: snapshot[key] for key in ("collected", "passed", "failed", "errors", "skipped")}


def _probes(kind: str) -> list[str]:
    return [node for dep in TASK["dependencies"] for node in dep[f"{kind}_probe_tests"]]


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("demo") / "base"
    make_base_repo(repo)
    return repo


@pytest.fixture
def workspace(base_repo: Path, tmp_path: Path) -> Path:
    """A fresh clone of the base commit, so patches never leak between tests."""
    clone = tmp_path / "testbed"
    subprocess.run(["git", "clone", "--quiet", str(base_repo), str(clone)], check=True)
    return clone


def _patched(workspace: Path, name: str) -> Path:
    result = _apply(workspace, (PATCHES / f"{name}.patch").read_text())
    assert result.returncode == 0, result.stderr
    return workspace


# --- without Docker ----------------------------------------------------------------------------


def test_base_commit_is_the_row_base_revision(base_repo: Path, tmp_path: Path) -> None:
    assert _git(base_repo, "rev-parse", "HEAD").stdout.strip() == TASK["base_revision"]
    assert make_base_repo(tmp_path / "again") == TASK["base_revision"]
    assert _git(base_repo, "status", "--porcelain").stdout == ""


def test_base_repo_has_no_pytest_configuration(base_repo: Path) -> None:
    tracked = _git(base_repo, "ls-files").stdout.split()
    assert not [p for p in tracked if Path(p).name in {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg"}]
    assert "[tool.pytest" not in (base_repo / "pyproject.toml").read_text()


def test_base_state_fails_as_recorded(workspace: Path) -> None:
    outcomes = _outcomes(workspace)
    assert _counts(outcomes) == _snapshot("demo_base")
    assert all(outcomes[node] == "failed" for node in _probes("upstream") + _probes("downstream"))


def test_gold_passes_every_test_and_every_probe_exists(workspace: Path) -> None:
    outcomes = _outcomes(_patched(workspace, "gold"))
    assert _counts(outcomes) == _snapshot("demo_gold_sanity")
    probes = set(_probes("upstream") + _probes("downstream") + _probes("integrated"))
    assert probes <= set(outcomes), f"probe ids not collected: {sorted(probes - set(outcomes))}"
    assert any("[" in node for node in probes), "at least one probe must be parametrized"


def test_partial_passes_upstream_probes_only(workspace: Path) -> None:
    outcomes = _outcomes(_patched(workspace, "partial"))
    assert {outcomes[node] for node in _probes("upstream")} == {"passed"}
    assert {outcomes[node] for node in _probes("downstream")} == {"failed"}


def test_syntax_error_breaks_collection(workspace: Path) -> None:
    outcomes = _outcomes(_patched(workspace, "syntax_error"))
    assert not any(outcome == "passed" for outcome in outcomes.values())


@pytest.mark.parametrize("name, agent_id", [("producer_only", "core_agent"), ("consumer_only", "api_agent")])
def test_agent_patches_stay_in_their_writable_paths(workspace: Path, name: str, agent_id: str) -> None:
    (specialist,) = [s for s in TASK["specialists"] if s["agent_id"] == agent_id]
    _patched(workspace, name)
    changed = _git(workspace, "diff", "--name-only").stdout.split()
    assert changed and set(changed) <= set(specialist["writable_paths"])


def test_example_predictions_apply_except_the_unsafe_paths(base_repo: Path) -> None:
    rows = [json.loads(line) for line in (PREDICTIONS / "examples.jsonl").read_text().splitlines()]
    assert len({row["model_name_or_path"] for row in rows}) == len(rows)
    for row in rows:
        assert row["task_id"] == TASK["task_id"] and row["protocol"] == "single"
        if not row["model_patch"]:
            continue
        applies = _apply(base_repo, row["model_patch"], check_only=True).returncode == 0
        assert applies is (row["model_name_or_path"] not in UNSAFE_PATH_PREDICTIONS), row["model_name_or_path"]


def test_multiagent_predictions_name_real_specialists(base_repo: Path) -> None:
    agents = {s["agent_id"] for s in TASK["specialists"]}
    rows = [json.loads(line) for line in (PREDICTIONS / "multiagent.jsonl").read_text().splitlines()]
    for row in rows:
        assert row["protocol"] in INTEGRATED_PROTOCOLS and set(row["agent_patches"]) == agents
        for patch in filter(None, row["agent_patches"].values()):
            assert _apply(base_repo, patch, check_only=True).returncode == 0


def test_write_digest_changes_only_the_digest_line(tmp_path: Path) -> None:
    copy = tmp_path / "task.yaml"
    shutil.copy(DEMO_DIR / "task.yaml", copy)
    digest = "sha256:" + "ab" * 32
    assert demo_image.write_digest(digest, copy)
    before, after = (DEMO_DIR / "task.yaml").read_text().splitlines(), copy.read_text().splitlines()
    assert [(a, b) for a, b in zip(before, after, strict=True) if a != b] == [
        (f"container_digest: {TASK['container_digest']}", f"container_digest: {digest}")
    ]
    assert not demo_image.write_digest(digest, copy)


# --- with Docker -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_image(services: None) -> demo_image.BuiltImage:
    # `services` (tests/conftest.py) starts dockerd and the registry, or fails: the Docker tests never skip.
    return demo_image.build(registry_port_from_env())


def _run_in(pinned_ref: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "--network", "none", pinned_ref, "bash", "-c", script],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.docker
def test_image_is_pushed_and_pinned_by_digest(built_image: demo_image.BuiltImage) -> None:
    port = registry_port_from_env()
    assert built_image.pinned_ref == f"127.0.0.1:{port}/asyncodebench/demo-minicache@{built_image.digest}"
    tag = f"127.0.0.1:{port}/asyncodebench/demo-minicache:v0"
    repo_digests = json.loads(subprocess.run(["docker", "image", "inspect", "--format", "{{json .RepoDigests}}",
                                              tag], capture_output=True, text=True, check=True).stdout)
    assert built_image.pinned_ref in repo_digests


@pytest.mark.docker
def test_rebuild_gives_the_same_digest(built_image: demo_image.BuiltImage) -> None:
    assert demo_image.build(registry_port_from_env()) == built_image


@pytest.mark.docker
def test_container_checkout_is_the_base_revision(built_image: demo_image.BuiltImage) -> None:
    result = _run_in(built_image.pinned_ref, "cd /testbed && git rev-parse HEAD && git status --porcelain")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == TASK["base_revision"] == built_image.base_revision


@pytest.mark.docker
def test_container_runs_pytest_with_a_json_report(built_image: demo_image.BuiltImage) -> None:
    script = ("cd /testbed && python3 -m pytest --json-report --json-report-file=/tmp/r.json -q tests >/dev/null; "
              "cat /tmp/r.json")
    result = _run_in(built_image.pinned_ref, script)
    summary = json.loads(result.stdout)["summary"]
    expected = _snapshot("demo_base")
    assert (summary["collected"], summary["passed"], summary["failed"]) == (
        expected["collected"], expected["passed"], expected["failed"])
