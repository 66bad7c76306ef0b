"""An agent that fills its workspace's disk, or an in-container agent that fills its process table, is recovered
and still scored on its in-scope work, and cost caps end an agent as the model's spending: scripts/run_agents.py
with the scripted model server (which reports usage), the real agent loops and real containers (one module fixture,
four runs of the demo task):

- `scripted-disk` (`single`, a 64 MB work tree and a 64 MB /tmp, evaluated): the agent fills the work tree with a
  scratch file outside its writable paths (the write fails: the runner measures the disk, removes the file and
  says so), fills /tmp without a word (its next command, the gold edits, fails for want of space: /tmp is emptied
  and the agent told), writes the gold edits again, fills the tree once more without a word and submits. Before
  the patch is read the tree is found full and the scratch removed, so git can read it: the gold patch, solved,
  with each removal recorded, both scratch files listed as dropped and in the evaluation report's flags.
- `scripted-agent-cost` (`serial_specialists`, a price table at $1 a token, `--max-cost 1`): each specialist's
  first response costs more than its cap, so each ends after it as `cost_limit`, with its cost recorded.
- `scripted-scenario-cost` (the same with only `--max-scenario-cost 1`): the first specialist's response uses the
  scenario's cap; it ends after it, and the second makes no call at all. Both are valid endings, never invalid.
- `scripted-cli-forkbomb` (`single`, `--agent shell-cli`, a process limit of 64, evaluated): the in-container
  agent starts a fork bomb that outlives its command; its next command cannot fork (the agent fails with it, or
  reports the failed fork to its model). Every process of the container is ended, the agent started again with a
  note, and it writes the gold edits: solved.
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

from asyncodebench.agents.container import REMOVED_REASON
from asyncodebench.harness.spec import DEFAULT_WORKDIR
from asyncodebench.scoring.patches import touched_paths

pytestmark = pytest.mark.docker

SINGLE, SERIAL = f"{DEMO_TASK}/single", f"{DEMO_TASK}/serial_specialists"
SCRATCH, LAST_SCRATCH, TMP_FILL = "scratch.bin", "notes.bin", "/tmp/fill.bin"
FILL_TREE = f"head -c 100000000 /dev/urandom > {SCRATCH}; echo head-exit=$?"  # more than the 64 MB tree holds
FILL_TMP_QUIETLY = f"head -c 100000000 /dev/urandom > {TMP_FILL} 2>/dev/null; true"
FILL_TREE_QUIETLY = f"head -c 100000000 /dev/urandom > {LAST_SCRATCH} 2>/dev/null; true"
DISK: dict[str, list[Any]] = {f"{SINGLE}/single_agent": [
    FILL_TREE, FILL_TMP_QUIETLY, apply(demo_patch("gold")), apply(demo_patch("gold")), FILL_TREE_QUIETLY, SUBMIT]}
STEPS = [f"echo step {n}" for n in range(1, 6)] + [SUBMIT]
COST: dict[str, list[Any]] = {f"{SERIAL}/core_agent": STEPS, f"{SERIAL}/api_agent": STEPS}
PRICES = {"prompt_per_million": 1_000_000, "completion_per_million": 1_000_000}  # $1 a token: any response > $1
# Detached from the command's output, so the command returns while its children fork up to the limit and stay.
FORK_BOMB = "(bomb() { bomb & bomb & wait; }; bomb) >/dev/null 2>&1 </dev/null &"
FILLED = "sleep 3; echo waited"  # by then the bomb holds every free process slot
CLI: dict[str, list[Any]] = {f"{SINGLE}/single_agent": [FORK_BOMB, FILLED, apply(demo_patch("gold")), SUBMIT]}


@pytest.fixture(scope="module")
def runs(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("disk-and-cost")
    prices = out / "prices.json"
    prices.write_text(json.dumps({"scripted": PRICES}))
    scored_runs = {
        "scripted-disk": scripted_run(out, "scripted-disk", DISK, demo_dataset.path, "--scenarios", SINGLE,
                                      "--workspace-size", "64m", "--tmp-size", "64m"),
        "scripted-cli-forkbomb": scripted_run(out, "scripted-cli-forkbomb", CLI, demo_dataset.path, "--scenarios",
                                              SINGLE, "--agent", "shell-cli", "--pids", "64",
                                              "--command-timeout", "60")}
    done = evaluated_runs(scored_runs, out, demo_dataset.path, evaluate, "exhausted-eval")
    for name, cap in (("scripted-agent-cost", "--max-cost"), ("scripted-scenario-cost", "--max-scenario-cost")):
        done["runs"][name] = scripted_run(out, name, COST, demo_dataset.path, "--scenarios", SERIAL,
                                          "--prices", str(prices), cap, "1")
    return done


def observations(runs: dict[str, Any], name: str, protocol: str) -> list[dict[str, Any]]:
    (agent,) = line(runs, name, protocol)["runner"]["agents"]
    path = Path(runs["runs"][name]["dir"]) / agent["trajectory"]
    return [t for t in map(json.loads, path.read_text().splitlines()) if t["type"] == "observation"]


def test_an_agent_that_fills_its_disk_is_scored_on_its_in_scope_work(runs: dict[str, Any]) -> None:
    prediction = line(runs, "scripted-disk", "single")
    assert touched_paths(prediction["model_patch"]).paths == touched_paths(demo_patch("gold")).paths
    (agent,) = prediction["runner"]["agents"]
    assert (agent["termination_reason"], agent["patch_problem"]) == ("agent_finish", None)
    row = scored(runs, "scripted-disk", "single")
    assert (row["patch_status"], row["final_success"]) == ("applied", True)
    assert runs["runs"]["scripted-disk"]["containers_left"] == []


def test_each_full_disk_is_recovered_recorded_and_told(runs: dict[str, Any]) -> None:
    (agent,) = line(runs, "scripted-disk", "single")["runner"]["agents"]
    tree, tmp, at_patch = agent["recoveries"]
    assert (tree["cause"], tree["command_index"], tree["full"], tree["removed"], tree["still_full"]) == (
        "disk_full", 1, [DEFAULT_WORKDIR], [SCRATCH], [])
    assert (tmp["cause"], tmp["command_index"], tmp["full"], tmp["still_full"]) == ("disk_full", 3, ["/tmp"], [])
    assert TMP_FILL in tmp["removed"]
    assert (at_patch["cause"], at_patch["command_index"], at_patch["full"], at_patch["removed"]) == (
        "disk_full", 6, [DEFAULT_WORKDIR], [LAST_SCRATCH])
    assert agent["exhausted_commands"] == 2  # the two commands whose writes failed; the patch's read is not one
    by_command = {o["command"]: o for o in observations(runs, "scripted-disk", "single")}
    assert "disk was full" in by_command[FILL_TREE]["output"] and SCRATCH in by_command[FILL_TREE]["output"]
    gold = [o for o in observations(runs, "scripted-disk", "single") if o["command"] == apply(demo_patch("gold"))]
    assert [o["exit_code"] == 0 for o in gold] == [False, True]
    assert "No space left on device" in gold[0]["output"] and "under /tmp" in gold[0]["output"]


def test_the_removed_scratch_is_dropped_and_flagged(runs: dict[str, Any]) -> None:
    (agent,) = line(runs, "scripted-disk", "single")["runner"]["agents"]
    assert sorted(agent["out_of_scope"]) == sorted([SCRATCH, LAST_SCRATCH])
    assert sorted((d["path"], d["reason"]) for d in agent["dropped"]) == [
        (LAST_SCRATCH, REMOVED_REASON), (SCRATCH, REMOVED_REASON)]
    row = scored(runs, "scripted-disk", "single")
    assert sorted(row["dropped_by_runner"]) == sorted([SCRATCH, LAST_SCRATCH])
    assert "2 path(s) dropped by the agent runner" in (runs["eval"].run_dir / "report.md").read_text()


def priced(agent: dict[str, Any]) -> float:
    usage = agent["usage"]
    return (usage["prompt_tokens"] * PRICES["prompt_per_million"]
            + usage["completion_tokens"] * PRICES["completion_per_million"]) / 1e6


def test_an_agent_over_its_cost_cap_stops_as_cost_limit(runs: dict[str, Any]) -> None:
    prediction = line(runs, "scripted-agent-cost", "serial_specialists")
    assert prediction["runner"]["valid"] is True and prediction["runner"]["invalid"] == []
    agents = {a["agent_id"]: a for a in prediction["runner"]["agents"]}
    for agent in agents.values():
        assert (agent["termination_reason"], agent["usage"]["responses"]) == ("cost_limit", 1)
        assert "--max-cost $1.0" in agent["detail"]
        assert agent["cost_usd"] == pytest.approx(priced(agent)) and agent["cost_usd"] > 1
    assert prediction["usage"]["cost_usd"] == pytest.approx(sum(a["cost_usd"] for a in agents.values()))
    model = prediction["runner"]["model"]
    assert model["cost"] == {**PRICES, "max_agent_usd": 1.0, "max_scenario_usd": None}
    settings = json.loads((Path(runs["runs"]["scripted-agent-cost"]["dir"]) / "settings.json").read_text())
    assert settings["cost"] == model["cost"]


def test_a_scenario_over_its_cost_cap_stops_every_agent(runs: dict[str, Any]) -> None:
    prediction = line(runs, "scripted-scenario-cost", "serial_specialists")
    assert prediction["runner"]["valid"] is True
    agents = {a["agent_id"]: a for a in prediction["runner"]["agents"]}
    assert {k: (a["termination_reason"], a["usage"]["responses"]) for k, a in agents.items()} == {
        "core_agent": ("cost_limit", 1), "api_agent": ("cost_limit", 0)}
    assert all("--max-scenario-cost $1.0" in a["detail"] for a in agents.values())
    assert agents["api_agent"]["cost_usd"] == 0
    assert prediction["usage"]["cost_usd"] == pytest.approx(priced(agents["core_agent"]))
    assert prediction["runner"]["model"]["cost"]["max_scenario_usd"] == 1.0


def test_an_in_container_agent_whose_process_table_fills_is_restarted_and_solves(runs: dict[str, Any]) -> None:
    prediction = line(runs, "scripted-cli-forkbomb", "single")
    assert prediction["runner"]["agent"]["name"] == "shell-cli"
    assert touched_paths(prediction["model_patch"]).paths == touched_paths(demo_patch("gold")).paths
    (agent,) = prediction["runner"]["agents"]
    assert agent["termination_reason"] == "agent_finish"
    (recovery,) = agent["recoveries"]
    assert recovery["cause"] == "process_limit" and agent["exhausted_commands"] == 1
    assert ("workspace_recovered", "single_agent") in [(e["event"], e.get("agent_id"))
                                                       for e in prediction["runner"]["events"]]
    row = scored(runs, "scripted-cli-forkbomb", "single")
    assert (row["patch_status"], row["final_success"]) == ("applied", True)
    assert runs["runs"]["scripted-cli-forkbomb"]["containers_left"] == []


def test_the_restarted_agent_is_told_why(runs: dict[str, Any]) -> None:
    (agent,) = line(runs, "scripted-cli-forkbomb", "single")["runner"]["agents"]
    path = Path(runs["runs"]["scripted-cli-forkbomb"]["dir"]) / agent["trajectory"]
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    (restart,) = [n for n, t in enumerate(lines) if t["type"] == "restart"]
    told = [t for t in lines[restart:] if t["type"] == "message" and t.get("role") == "user"]
    assert told and "your previous session in this workspace was ended" in told[0]["content"]
    responses = [t for t in lines[restart:] if t["type"] == "response"]
    assert responses[0]["commands"] == [apply(demo_patch("gold"))]
