"""An agent that wrecks its own container, or leaves a huge scratch file outside its paths, still gets its in-scope
work scored: scripts/run_agents.py with the scripted model server, the real agent loop and real containers, then
evaluate.py on the predictions (one module fixture, the demo task's `single` scenario under two model names):

- `scripted-forkbomb`: the agent starts a fork bomb that fills the container's process limit and returns at once
  (its output redirected, so the command itself ends), then writes the gold edits and submits. The runner must see
  that the next command could not start (or started and could not fork), end every process of the container from
  outside and tell the agent: the edits that follow work, the prediction is the gold patch and scores solved.
- `scripted-scratch`: the agent writes a 25 MB file outside its writable paths and the gold edits. The 20 MB patch
  limit applies to what is kept (the in-scope edits): the prediction is the gold patch, scores solved, and the
  scratch file is listed as dropped in the runner's record and in the evaluation report's flags. This run also
  gives the sampling options (recorded in the settings and every prediction) and shows the per-agent progress.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.agent_runs import evaluated_runs, line, scored, scripted_run
from helpers.agent_scripts import DEMO_TASK, SUBMIT, apply, demo_patch
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import EvalRun

from asyncodebench.scoring.patches import touched_paths

pytestmark = pytest.mark.docker

PIDS = 64  # the run's process limit: small, so the bomb fills it at once
# Detached from the command's output, so the command returns while its children fork up to the limit and stay
# (each waits for its own): the next command's `timeout` cannot fork (exit 125, as the issue saw).
FORK_BOMB = "(bomb() { bomb & bomb & wait; }; bomb) >/dev/null 2>&1 </dev/null &"
FILLED = "sleep 3; echo waited"  # by then the bomb holds every free process slot
SCRATCH = "scratch.bin"  # outside the single agent's writable paths (the repository root is not one of them)
SAMPLING = {"temperature": 0.0, "max_tokens": 4096, "seed": 7}
FLAGS = {"scripted-forkbomb": (), "scripted-scratch": (
    "--temperature", "0", "--max-tokens", "4096", "--seed", "7")}
RUNS: dict[str, dict[str, list[Any]]] = {
    "scripted-forkbomb": {f"{DEMO_TASK}/single/single_agent": [FORK_BOMB, FILLED, apply(demo_patch("gold")), SUBMIT]},
    "scripted-scratch": {f"{DEMO_TASK}/single/single_agent": [
        f"head -c 25000000 /dev/urandom > {SCRATCH} && ls -l {SCRATCH}", apply(demo_patch("gold")), SUBMIT]},
}


@pytest.fixture(scope="module")
def recovery_runs(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("recovery-runs")
    runs = {name: scripted_run(out, name, scripts, demo_dataset.path, "--scenarios", f"{DEMO_TASK}/single",
                               "--pids", str(PIDS), "--command-timeout", "60", *FLAGS[name])
            for name, scripts in RUNS.items()}
    return evaluated_runs(runs, out, demo_dataset.path, evaluate, "recovery-eval")


def observations(runs: dict[str, Any], name: str) -> list[dict[str, Any]]:
    prediction = line(runs, name, "single")
    (agent,) = prediction["runner"]["agents"]
    path = Path(runs["runs"][name]["dir"]) / agent["trajectory"]
    return [t for t in map(json.loads, path.read_text().splitlines()) if t["type"] == "observation"]


def test_an_agent_that_fork_bombs_then_solves_is_scored_solved(recovery_runs: dict[str, Any]) -> None:
    prediction = line(recovery_runs, "scripted-forkbomb", "single")
    assert touched_paths(prediction["model_patch"]).paths == touched_paths(demo_patch("gold")).paths
    row = scored(recovery_runs, "scripted-forkbomb", "single")
    assert (row["patch_status"], row["final_success"]) == ("applied", True)
    (agent,) = prediction["runner"]["agents"]
    assert agent["termination_reason"] == "agent_finish"
    assert recovery_runs["runs"]["scripted-forkbomb"]["containers_left"] == []


def test_the_agent_is_told_its_processes_were_ended_and_the_recovery_is_recorded(
        recovery_runs: dict[str, Any]) -> None:
    seen = observations(recovery_runs, "scripted-forkbomb")
    by_command = {o["command"]: o for o in seen}
    # Either the command could not start (then it ran once the container was emptied), or it started and its shell
    # found no room to fork (it failed, or its retries got a process at last): each ends every process and says so.
    waited = by_command[FILLED]
    assert "process limit" in waited["output"] and "was ended" in waited["output"]
    assert ("waited" in waited["output"]) == (waited["exit_code"] == 0)
    edits = by_command[apply(demo_patch("gold"))]
    assert edits["exit_code"] == 0 and "Resource temporarily unavailable" not in edits["output"]
    prediction = line(recovery_runs, "scripted-forkbomb", "single")
    (agent,) = prediction["runner"]["agents"]
    (recovery,) = agent["recoveries"]
    assert recovery["cause"] == "process_limit" and recovery["command_index"] == 2
    assert ("workspace_recovered", "single_agent") in [(e["event"], e.get("agent_id"))
                                                       for e in prediction["runner"]["events"]]


def test_a_big_scratch_file_outside_the_paths_does_not_erase_the_in_scope_work(
        recovery_runs: dict[str, Any]) -> None:
    prediction = line(recovery_runs, "scripted-scratch", "single")
    assert touched_paths(prediction["model_patch"]).paths == touched_paths(demo_patch("gold")).paths
    (agent,) = prediction["runner"]["agents"]
    assert agent["patch_problem"] is None
    assert agent["out_of_scope"] == [SCRATCH]
    assert agent["dropped"] == [{"path": SCRATCH, "reason": "outside the writable paths"}]
    row = scored(recovery_runs, "scripted-scratch", "single")
    assert (row["patch_status"], row["final_success"]) == ("applied", True)


def test_the_dropped_scratch_file_is_in_the_evaluation_reports_flags(recovery_runs: dict[str, Any]) -> None:
    row = scored(recovery_runs, "scripted-scratch", "single")
    assert row["dropped_by_runner"] == [SCRATCH]
    report_md = (recovery_runs["eval"].run_dir / "report.md").read_text()
    assert "1 path(s) dropped by the agent runner" in report_md and SCRATCH in report_md


def test_sampling_options_are_recorded_and_each_agent_shows_its_progress(recovery_runs: dict[str, Any]) -> None:
    run = recovery_runs["runs"]["scripted-scratch"]
    model = line(recovery_runs, "scripted-scratch", "single")["runner"]["model"]
    assert {k: model[k] for k in SAMPLING} == SAMPLING
    assert json.loads((Path(run["dir"]) / "settings.json").read_text())["sampling"] == SAMPLING
    unset = line(recovery_runs, "scripted-forkbomb", "single")["runner"]["model"]
    assert {k: unset[k] for k in SAMPLING} == dict.fromkeys(SAMPLING)
    scenario = f"{DEMO_TASK}/single"
    assert f"{scenario}: single_agent started in asyncodebench-" in run["stderr"]
    assert f"{scenario}: single_agent finished: agent_finish, 3 responses" in run["stderr"]
