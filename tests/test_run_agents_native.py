"""scripts/run_agents.py on the native demo task (vecstats): each agent's workspace holds a writable copy of the
task's build tree, so a scripted agent builds the C++ code with the task's build command and runs the tests in its
own container, as the evaluator will; nothing it builds enters its patch. Then evaluate.py scores the output.

One run serves most tests: `single` (one agent writes the gold solution, builds and runs every test) and
`async_private` (the C++ specialist writes and builds the native half, the Python specialist the binding). One
workspace opened directly shows that a .gitignore taking the build tree back in does not bring it into the patch.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.agent_scripts import (
    NATIVE_BUILD,
    NATIVE_TASK,
    NATIVE_TESTS,
    SUBMIT,
    apply,
    native_patch,
    run_agents,
    write_scripts,
)
from helpers.containers import RUN_LABEL, run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import NATIVE_RUN_BUILD_SECONDS, SCORING_FLAGS, EvalRun

from asyncodebench.agents.container import agent_workspace
from asyncodebench.agents.trajectory import read_trajectory
from asyncodebench.dataset.rows import load_published
from asyncodebench.harness.evaluation import Settings, Workbench, new_run_id
from asyncodebench.harness.sandbox import docker_client, remove_run_containers
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.scoring.patches import touched_paths

pytestmark = pytest.mark.docker

SCRIPTS = {
    f"{NATIVE_TASK}/single/single_agent": [
        apply(native_patch("gold")),
        NATIVE_BUILD,
        NATIVE_TESTS,
        "git status --short --untracked-files=all",
        SUBMIT,
    ],
    "native_agent": [apply(native_patch("producer_only")), NATIVE_BUILD,
                     "python3 -m pytest -q -p no:cacheprovider tests/test_native.py", SUBMIT],
    "python_agent": [apply(native_patch("consumer_only")), SUBMIT],
}


@pytest.fixture(scope="module")
def native_agents(native_demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("native-agent-runs")
    run_id = f"native-agents-{secrets.token_hex(3)}"
    done = run_agents(write_scripts(out / "scripts.json", SCRIPTS), native_demo_dataset.path, out, run_id,
                      "--name", "scripted-native", "--scenarios", "*/single,*/async_private", "--max-workers", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = out / run_id
    predictions = run_dir / "predictions.jsonl"
    evaluated = evaluate(predictions, native_demo_dataset.path, *SCORING_FLAGS, "--max-workers", "2",
                         "--build-timeout", str(NATIVE_RUN_BUILD_SECONDS * 8),
                         run_id=f"native-agents-eval-{secrets.token_hex(3)}")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    volumes = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"label={RUN_LABEL}"], capture_output=True,
                             text=True, check=True).stdout.split()
    labels = [subprocess.run(["docker", "volume", "inspect", "-f", f'{{{{index .Labels "{RUN_LABEL}"}}}}', v],
                             capture_output=True, text=True).stdout.strip() for v in volumes]
    return {"dir": run_dir, "containers_left": run_containers(run_id), "eval": evaluated,
            "volumes_left": [label for label in labels if label.startswith(run_id)],
            "lines": [json.loads(line) for line in predictions.read_text().splitlines()]}


def _line(runs: dict[str, Any], protocol: str) -> dict[str, Any]:
    (found,) = [p for p in runs["lines"] if p["protocol"] == protocol]
    return found


def _observations(runs: dict[str, Any], protocol: str, agent_id: str) -> dict[str, dict[str, Any]]:
    """The agent's commands and what each did, from its trajectory."""
    (entry,) = [a for a in _line(runs, protocol)["runner"]["agents"] if a["agent_id"] == agent_id]
    lines = read_trajectory(Path(runs["dir"]) / entry["trajectory"])
    return {t["command"]: t for t in lines if t["type"] == "observation"}


@pytest.mark.parametrize("protocol, checkpoints", [("single", 1), ("async_private", 5)])
def test_gold_is_reached_and_scored_resolved(native_agents: dict[str, Any], protocol: str, checkpoints: int) -> None:
    (row,) = [p for p in native_agents["eval"].report["predictions"] if p["protocol"] == protocol]
    assert row["status"] == "evaluated" and row["final_success"] is True and row["pass_rate"] == 1.0, row
    assert row["checkpoint_count"] == checkpoints
    assert _line(native_agents, protocol)["model_patch"] == native_patch("gold")


def test_the_prompt_gives_the_build_command(native_agents: dict[str, Any]) -> None:
    (entry,) = [a for a in _line(native_agents, "single")["runner"]["agents"] if a["agent_id"] == "single_agent"]
    lines = read_trajectory(Path(native_agents["dir"]) / entry["trajectory"])
    prompt = next(t["content"] for t in lines if t["type"] == "message" and t["role"] == "user")
    assert "## Building the native code" in prompt
    assert f"rebuild it in your current folder with: {NATIVE_BUILD}" in prompt


def test_the_agent_builds_and_tests_in_its_own_container(native_agents: dict[str, Any]) -> None:
    single = _observations(native_agents, "single", "single_agent")
    assert single[NATIVE_BUILD]["exit_code"] == 0, single[NATIVE_BUILD]["output"]
    assert "libvecstats.so" in single[NATIVE_BUILD]["output"]  # the changed sources were compiled and linked
    assert single[NATIVE_TESTS]["exit_code"] == 0 and "48 passed" in single[NATIVE_TESTS]["output"]
    specialist = _observations(native_agents, "async_private", "native_agent")
    assert specialist[NATIVE_BUILD]["exit_code"] == 0, specialist[NATIVE_BUILD]["output"]
    tests = specialist["python3 -m pytest -q -p no:cacheprovider tests/test_native.py"]
    assert tests["exit_code"] == 0 and " passed" in tests["output"] and "failed" not in tests["output"]


def test_patches_hold_only_source_changes(native_agents: dict[str, Any]) -> None:
    """What the agents built stays out of their patches."""
    single = _observations(native_agents, "single", "single_agent")
    assert " src/order.cpp" in single["git status --short --untracked-files=all"]["output"]
    sources = {"include/vecstats.h", "src/order.cpp", "src/spread.cpp", "vecstats/stats.py"}
    gold = _line(native_agents, "single")
    assert set(touched_paths(gold["model_patch"]).paths) == sources
    patches = _line(native_agents, "async_private")["agent_patches"]
    assert patches == {"native_agent": native_patch("producer_only"), "python_agent": native_patch("consumer_only")}


def test_nothing_is_left_behind(native_agents: dict[str, Any]) -> None:
    """No container, and no volume: the base, nor any workspace's build tree overlay and its tmpfs."""
    assert native_agents["containers_left"] == [] and native_agents["volumes_left"] == []


def test_a_gitignore_taking_the_build_tree_back_in_does_not_bring_it_into_the_patch(
        native_demo_dataset: DemoDataset) -> None:
    rows = load_published(str(native_demo_dataset.path)).rows
    (task,) = [t for t in rows.tasks if t["task_id"] == NATIVE_TASK]
    spec = TaskSpec.from_rows(task, rows.dependencies)
    client, run_id = docker_client(), new_run_id()
    try:
        bench = Workbench.open(client, spec, run_id, Settings(), {})
        with agent_workspace(bench, b"", 120) as workspace:
            assert workspace.execute(apply(native_patch("gold"))).exit_code == 0
            assert workspace.execute(NATIVE_BUILD).exit_code == 0
            status = workspace.execute("printf '!/build/\\n' >> .gitignore && git status --short -uall")
            assert "?? build/libvecstats.so" in status.output  # git itself would now take the build tree
            read = workspace.patch(tuple(spec.single_agent_paths))
            raw, problem = read.raw, read.problem
    finally:
        remove_run_containers(client, run_id)
    assert problem is None
    paths = set(touched_paths(raw.decode()).paths)
    assert paths == {".gitignore", "include/vecstats.h", "src/order.cpp", "src/spread.cpp", "vecstats/stats.py"}
