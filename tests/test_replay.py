"""Checkpoint replay, agent patch integration and rescoring on the demo task, with real containers.

One run evaluates the demo's multi-agent and checkpoint predictions; the tests read its results, its checkpoint
files and its report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID, ROOT
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import FAST_FLAGS, EvalRun

from asyncodebench.run.runfolder import prediction_folders

pytestmark = pytest.mark.docker

REPLAY_FILES = ("multiagent.jsonl", "checkpoints.jsonl")
DEPENDENCIES = ("minicache.core_to_api.call_key_contract", "minicache.core_to_api.lru_eviction_contract",
                "minicache.core_to_api.clear_contract")


@pytest.fixture(scope="module")
def replay_run(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> EvalRun:
    lines = [json.loads(line) for name in REPLAY_FILES
             for line in (DEMO_DIR / "predictions" / name).read_text().splitlines() if line.strip()]
    run = evaluate(lines, demo_dataset.path, *FAST_FLAGS, "--max-workers", "2", run_id="replay")
    assert run.returncode == 0, run.stderr
    return run


def result(run: EvalRun, model: str, protocol: str) -> dict[str, Any]:
    (folder,) = [f for f in prediction_folders(run.run_dir)
                 if f.name.startswith(f"{model}__{protocol}__")]
    return json.loads((folder / "result.json").read_text())


def per_dependency(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["dependency_id"]: d for d in res["run_metrics"]["dependencies"]}


def test_producer_first_then_consumer_gives_the_worked_example_figures(replay_run: EvalRun) -> None:
    """Producer lands at step 1-2, consumer at 3-4: up 1, down 3, DRS 4 (agent step 3 does not count), CAIL 2."""
    res = result(replay_run, "replay-producer-first", "serial_specialists")
    assert res["run_metrics"]["checkpoint_count"] == 5
    assert res["adpr"] == 1.0 and res["final_success"]
    for dep_id in DEPENDENCIES:
        dep = per_dependency(res)[dep_id]
        assert (dep["up"], dep["down"], dep["drs"], dep["drs_penalized"]) == (1, 3, 4, 4)
        assert dep["dre"] == pytest.approx(0.4)
        assert (dep["cail_raw"], dep["cail_penalized"]) == (2, 2)


def test_consumer_never_lands_takes_the_penalties(replay_run: EvalRun) -> None:
    """Only the producer side ever passes: unresolved, DRS = T+1, CAIL = T+1-up (three-case rule)."""
    res = result(replay_run, "replay-consumer-stale", "async_private")
    metrics = res["run_metrics"]
    assert metrics["checkpoint_count"] == 3 and res["adpr"] == 0.0 and metrics["unresolved_count"] == 3
    for dep in metrics["dependencies"]:
        assert (dep["up"], dep["down"], dep["drs"]) == (1, None, None)
        assert (dep["drs_penalized"], dep["dre"], dep["cail_raw"], dep["cail_penalized"]) == (4, 0, None, 3)


def test_clean_agent_patches_follow_the_official_checkpoint_model(replay_run: EvalRun) -> None:
    res = result(replay_run, "multi-clean", "serial_specialists")
    steps = res["dependency_trace"][DEPENDENCIES[0]]
    assert [s["checkpoint_type"] for s in steps] == [
        "agent_artifact", "integration_after_merge", "agent_artifact", "integration_after_merge", "final_integrated"]
    assert [s["agent_id"] for s in steps] == ["core_agent", "core_agent", "api_agent", "api_agent", None]
    assert res["integration"]["merges"][0]["agent_id"] == "core_agent"  # the producer is merged first
    assert all(m["merge_status"] == "clean" for m in res["integration"]["merges"])
    assert res["final_success"] and res["adpr"] == 1.0


def test_private_workspaces_lag_behind_the_serial_handoff(replay_run: EvalRun) -> None:
    """In async_private the consumer works from the base, so its probes pass only after the merge (CAIL 3)."""
    serial = per_dependency(result(replay_run, "multi-clean", "serial_specialists"))
    private = per_dependency(result(replay_run, "multi-clean", "async_private"))
    for dep_id in DEPENDENCIES:
        assert serial[dep_id]["down"] == 3 and private[dep_id]["down"] == 4
        assert private[dep_id]["cail_penalized"] == 3


def test_out_of_scope_artifact_is_rejected_as_a_scope_violation(replay_run: EvalRun) -> None:
    res = result(replay_run, "multi-out-of-scope", "serial_specialists")
    core, api = res["integration"]["merges"]
    assert core["agent_id"] == "core_agent" and core["reason"] == "scope_violation"
    assert core["merge_status"] == "error" and core["out_of_scope"] == ["tests/test_core.py"]
    assert api["merge_status"] == "clean"
    assert res["integration"]["scope_violations"] == 1 and res["integration"]["merge_conflicts"] == 0
    assert "tests/test_core.py" not in res["patch"]["changed_paths"]


def test_conflicting_edit_of_a_shared_file_is_recorded_as_a_conflict(replay_run: EvalRun) -> None:
    res = result(replay_run, "multi-conflict", "serial_specialists")
    core, api = res["integration"]["merges"]
    assert core["merge_status"] == "clean"
    assert (api["merge_status"], api["reason"], api["strategy"]) == ("conflict", "merge_conflict", "git-apply-3way")
    assert res["integration"]["merge_conflicts"] == 1
    assert not res["final_success"]  # the consumer's work never reached the integrated state


def test_report_carries_rates_traces_and_the_plot(replay_run: EvalRun) -> None:
    summary = {(r["model_name_or_path"], r["protocol"]): r for r in replay_run.report["summary"]}
    assert summary[("multi-out-of-scope", "serial_specialists")]["scope_violation_rate"] == 0.5
    assert summary[("multi-conflict", "serial_specialists")]["merge_conflict_rate"] == 0.5
    assert summary[("multi-clean", "serial_specialists")]["mean_drs_penalized"]["mean"] == 4.0
    markdown = (replay_run.run_dir / "report.md").read_text()
    assert "## Dependency traces" in markdown and "| minicache.core_to_api.clear_contract | U | U | UDI |" in markdown
    assert (replay_run.run_dir / "dependency_resolution.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](dependency_resolution.png)" in markdown  # the plot is shown with the traces


@pytest.mark.parametrize("model, protocol", [
    ("replay-producer-first", "serial_specialists"), ("replay-consumer-stale", "async_private"),
    ("multi-conflict", "serial_specialists"), ("multi-clean", "async_private"),
])
def test_recorded_checkpoint_file_rescores_to_the_live_metrics(
    replay_run: EvalRun, demo_dataset: DemoDataset, model: str, protocol: str
) -> None:
    """The checkpoint file the replay wrote (upstream layout) gives the same metrics without containers."""
    (folder,) = [f for f in prediction_folders(replay_run.run_dir) if f.name.startswith(f"{model}__{protocol}__")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rescore_checkpoints.py"),
         str(folder / "dependency_probe_checkpoints.jsonl"), "--task", DEMO_TASK_ID,
         "--dataset", str(demo_dataset.path), "--json"],
        capture_output=True, text=True, check=True,
    )
    live = json.loads((folder / "result.json").read_text())["run_metrics"]
    assert json.loads(done.stdout) == live


def test_rescoring_refuses_a_file_without_its_final_checkpoint(
    replay_run: EvalRun, demo_dataset: DemoDataset, tmp_path: Path
) -> None:
    (folder,) = [f for f in prediction_folders(replay_run.run_dir) if f.name.startswith("replay-producer-first__")]
    lines = (folder / "dependency_probe_checkpoints.jsonl").read_text().splitlines()
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("\n".join(lines[:-1]) + "\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rescore_checkpoints.py"), str(truncated), "--task", DEMO_TASK_ID,
         "--dataset", str(demo_dataset.path)], capture_output=True, text=True,
    )
    assert done.returncode == 1
    assert "final_integrated" in done.stderr and str(truncated) in done.stderr
