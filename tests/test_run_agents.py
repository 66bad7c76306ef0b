"""scripts/run_agents.py end to end on the demo task: the scripted model server (real HTTP), mini-swe-agent's real
loop, real task containers; then evaluate.py on its predictions, whose scores are known in advance.

Three runs of scripted agents share one evaluation (a module fixture), each under its own model name:
- `scripted-gold`: single, serial_specialists and async_private reach the gold solution (the specialists write the
  demo's producer and consumer halves);
- `scripted-trouble` (`--budget 3`): a single agent that does nothing; a serial producer that never submits (the
  budget stops it, its work is still handed on); two private specialists that both change a shared file (a merge
  conflict);
- `scripted-hostile`: a single agent and a serial producer that write outside their paths, try the network, the
  host, `.git` and the container's init, and flood their output.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.agent_runs import line, scored
from helpers.agent_scripts import (
    DEMO_TASK,
    ESCAPE_FILE,
    SUBMIT,
    apply,
    demo_patch,
    hostile_commands,
    run_agents,
    version_bump,
    write_scripts,
)
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import SCORING_FLAGS, EvalRun
from helpers.timeline_checks import check_agent_run_pages

from asyncodebench.agents.trajectory import OUTPUT_CHARS
from asyncodebench.dataset.validation import validator
from asyncodebench.reports.usage import trajectory_links
from asyncodebench.run.predictions import read_predictions
from asyncodebench.scoring.patches import touched_paths

pytestmark = pytest.mark.docker

GOLD = {
    f"{DEMO_TASK}/single/single_agent": ["git status --short", apply(demo_patch("gold")), SUBMIT],
    "core_agent": [apply(demo_patch("producer_only")), SUBMIT],
    "api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
}
TROUBLE = {
    "single_agent": [SUBMIT],
    f"{DEMO_TASK}/serial_specialists/core_agent": [apply(demo_patch("producer_only")), "ls", "ls", "ls", "ls"],
    f"{DEMO_TASK}/serial_specialists/api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
    f"{DEMO_TASK}/async_private/core_agent": [apply(demo_patch("producer_only")), version_bump("0.2.0-core"), SUBMIT],
    f"{DEMO_TASK}/async_private/api_agent": [apply(demo_patch("consumer_only")), version_bump("0.2.0-api"), SUBMIT],
}
HOSTILE = {
    "single_agent": hostile_commands("minicache/core.py"),
    "core_agent": [apply(demo_patch("producer_only")), *hostile_commands("minicache/core.py")],
    "api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
}
UNMANAGED = "*/single,*/serial_specialists,*/async_private"  # the manager protocols: test_run_agents_managers.py
RUNS = {  # name -> (scripts, flags)
    "scripted-gold": (GOLD, ("--scenarios", UNMANAGED, "--max-workers", "2")),
    "scripted-trouble": (TROUBLE, ("--scenarios", UNMANAGED, "--budget", "3", "--max-workers", "2")),
    "scripted-hostile": (HOSTILE, ("--scenarios", "*/single,*/serial_specialists")),
}


@pytest.fixture(scope="module")
def agent_runs(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("agent-runs")
    Path(ESCAPE_FILE).unlink(missing_ok=True)
    runs, lines = {}, []
    for name, (scripts, flags) in RUNS.items():
        run_id = f"{name}-{secrets.token_hex(3)}"
        done = run_agents(write_scripts(out / f"{name}.json", scripts), demo_dataset.path, out, run_id,
                          "--name", name, *flags)
        assert done.returncode == 0, done.stderr[-3000:]
        run_dir = out / run_id
        predictions = run_dir / "predictions.jsonl"
        assert done.stdout.strip() == str(predictions)
        runs[name] = {"dir": run_dir, "stderr": done.stderr, "containers_left": run_containers(run_id),
                      "lines": [json.loads(line) for line in predictions.read_text().splitlines()]}
        lines += predictions.read_text().splitlines()
    combined = out / "all.jsonl"
    combined.write_text("\n".join(lines) + "\n")
    evaluated = evaluate(combined, demo_dataset.path, *SCORING_FLAGS, "--max-workers", "2",
                         run_id=f"agents-eval-{secrets.token_hex(3)}")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    return {"runs": runs, "eval": evaluated, "escape_file_exists": Path(ESCAPE_FILE).exists()}


def agent(prediction: dict[str, Any], agent_id: str) -> dict[str, Any]:
    (found,) = [a for a in prediction["runner"]["agents"] if a["agent_id"] == agent_id]
    return found


def test_every_prediction_is_valid_and_was_scored(agent_runs: dict[str, Any]) -> None:
    check = validator("prediction")
    made = [p for run in agent_runs["runs"].values() for p in run["lines"]]
    assert len(made) == 8
    for prediction in made:
        assert list(check.iter_errors(prediction)) == []
    counts = agent_runs["eval"].report["counts"]
    assert counts["evaluated"] == 8 and counts["infrastructure_errors"] == 0


@pytest.mark.parametrize("protocol, checkpoints, drs, cail", [
    ("single", 1, 1.0, 0.0),  # T = 1: the final state only
    ("serial_specialists", 5, 4.0, 2.0),  # the consumer's workspace holds the producer's work: down at step 3
    ("async_private", 5, 4.0, 3.0),  # the consumer's private workspace lacks it: down only once merged (step 4)
])
def test_gold_is_reached_under_each_protocol_with_the_expected_dependency_timing(
        agent_runs: dict[str, Any], protocol: str, checkpoints: int, drs: float, cail: float) -> None:
    row = scored(agent_runs, "scripted-gold", protocol)
    assert (row["final_success"], row["pass_rate"], row["adpr"]) == (True, 1.0, 1.0)
    assert (row["checkpoint_count"], row["drs_penalized_mean"], row["cail_penalized_mean"]) == (checkpoints, drs, cail)
    assert line(agent_runs, "scripted-gold", protocol)["model_patch"] == demo_patch("gold")


def test_specialists_patches_are_their_own_parts(agent_runs: dict[str, Any]) -> None:
    for protocol in ("serial_specialists", "async_private"):
        patches = line(agent_runs, "scripted-gold", protocol)["agent_patches"]
        assert patches == {"core_agent": demo_patch("producer_only"), "api_agent": demo_patch("consumer_only")}
        assert scored(agent_runs, "scripted-gold", protocol)["agents_integrated"] == 2


def test_usage_and_trajectories_are_recorded(agent_runs: dict[str, Any]) -> None:
    prediction = line(agent_runs, "scripted-gold", "serial_specialists")
    usage = prediction["usage"]
    assert usage["model_calls"] == 4  # two responses per specialist
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["runtime_seconds"] >= usage["agent_seconds"] > 0
    run_dir = agent_runs["runs"]["scripted-gold"]["dir"]
    core = agent(prediction, "core_agent")
    assert (core["termination_reason"], core["exit_status"], core["iteration_cap_hit"]) == (
        "agent_finish", "Submitted", False)
    trajectory = [json.loads(t) for t in (run_dir / core["trajectory"]).read_text().splitlines()]
    kinds = [t["type"] for t in trajectory]
    assert kinds == ["message", "message", "response", "observation", "response", "exit", "summary"]
    assert trajectory[3]["command"].startswith("cat > /tmp/change.patch") and trajectory[3]["exit_code"] == 0
    assert trajectory[-1]["usage"]["responses"] == core["usage"]["responses"] == 2
    assert sum(t.get("prompt_tokens", 0) for t in trajectory) == core["usage"]["prompt_tokens"]
    assert prediction["trajectories"] == [a["trajectory"] for a in prediction["runner"]["agents"]]
    events = [(e["event"], e.get("agent_id")) for e in prediction["runner"]["events"]]
    assert events == [("agent_started", "core_agent"), ("agent_finished", "core_agent"),
                      ("agent_artifact", "core_agent"), ("integration_after_merge", "core_agent"),
                      ("agent_started", "api_agent"), ("agent_finished", "api_agent"), ("agent_artifact", "api_agent"),
                      ("integration_after_merge", "api_agent"), ("final_integrated", None)]


def test_the_serial_consumer_is_handed_the_producers_artifact(agent_runs: dict[str, Any]) -> None:
    prediction = line(agent_runs, "scripted-gold", "serial_specialists")
    run_dir = agent_runs["runs"]["scripted-gold"]["dir"]
    prompt = json.loads((run_dir / agent(prediction, "api_agent")["trajectory"]).read_text().splitlines()[1])
    assert "- core_agent (cache core specialist): clean, changed minicache/core.py" in prompt["content"]
    assert "minicache/api.py" in prompt["content"] and "memoize" in prompt["content"]


def test_an_agent_that_does_nothing_leaves_the_base_state(agent_runs: dict[str, Any]) -> None:
    assert line(agent_runs, "scripted-trouble", "single")["model_patch"] == ""
    row = scored(agent_runs, "scripted-trouble", "single")
    assert (row["final_success"], row["tests_passed"], row["adpr"]) == (False, 7, 0.0)


def test_the_budget_in_model_responses_stops_an_agent_that_never_submits(agent_runs: dict[str, Any]) -> None:
    prediction = line(agent_runs, "scripted-trouble", "serial_specialists")
    core = agent(prediction, "core_agent")
    assert (core["termination_reason"], core["exit_status"], core["iteration_cap_hit"]) == (
        "iteration_limit", "LimitsExceeded", True)
    assert core["usage"]["responses"] == 3
    assert prediction["runner"]["budget"] == {"unit": "model_response", "per_agent_run": 3, "source": "--budget"}
    # What it did before the budget ran out is its artifact, handed on and merged: the consumer completes the task.
    assert prediction["agent_patches"]["core_agent"] == demo_patch("producer_only")
    assert scored(agent_runs, "scripted-trouble", "serial_specialists")["final_success"] is True


def test_a_merge_conflict_between_private_workspaces_is_recorded(agent_runs: dict[str, Any]) -> None:
    prediction = line(agent_runs, "scripted-trouble", "async_private")
    merges = {m["agent_id"]: (m["merge_status"], m["reason"]) for m in prediction["runner"]["merges"]}
    assert merges == {"core_agent": ("clean", None), "api_agent": ("conflict", "merge_conflict")}
    row = scored(agent_runs, "scripted-trouble", "async_private")
    assert (row["merge_conflicts"], row["final_success"]) == (1, False)
    summary = [s for s in agent_runs["eval"].report["summary"]
               if (s["model_name_or_path"], s["protocol"]) == ("scripted-trouble", "async_private")]
    assert summary[0]["merge_conflict_rate"] == 0.5


def test_a_single_agents_edits_outside_its_paths_are_not_carried(agent_runs: dict[str, Any]) -> None:
    prediction = line(agent_runs, "scripted-hostile", "single")
    assert touched_paths(prediction["model_patch"]).paths == ("minicache/core.py",)
    assert set(agent(prediction, "single_agent")["out_of_scope"]) == {"notes.txt", "tests/test_core.py"}
    row = scored(agent_runs, "scripted-hostile", "single")
    assert row["patch_status"] == "applied" and row["final_success"] is False


def test_a_specialists_artifact_outside_its_paths_is_a_scope_violation(agent_runs: dict[str, Any]) -> None:
    prediction = line(agent_runs, "scripted-hostile", "serial_specialists")
    assert set(agent(prediction, "core_agent")["out_of_scope"]) == {"notes.txt", "tests/test_core.py"}
    merges = {m["agent_id"]: (m["merge_status"], m["reason"]) for m in prediction["runner"]["merges"]}
    assert merges == {"core_agent": ("error", "scope_violation"), "api_agent": ("clean", None)}
    row = scored(agent_runs, "scripted-hostile", "serial_specialists")
    assert (row["scope_violations"], row["final_success"]) == (1, False)  # the rejected producer's work is missing


def test_hostile_commands_are_contained(agent_runs: dict[str, Any]) -> None:
    run = agent_runs["runs"]["scripted-hostile"]
    prediction = line(agent_runs, "scripted-hostile", "single")
    trajectory = [json.loads(t) for t in (run["dir"] / agent(prediction, "single_agent")["trajectory"])
                  .read_text().splitlines()]
    outputs = {t["command"]: t["output"] for t in trajectory if t["type"] == "observation"}
    by_start = {command.split()[0]: output for command, output in outputs.items()}
    assert "git-dir-exit=1" in by_start["touch"] and "Permission denied" in by_start["touch"]
    assert "network-exit=1" in by_start["python3"]
    assert "init-exit=1" in by_start["kill"]
    assert "No such file" in by_start["ls"] and by_start["ls"].strip().endswith("65534")
    assert len(by_start["yes"]) == OUTPUT_CHARS  # 5 MB of output: the trajectory keeps its tail
    assert agent_runs["escape_file_exists"] is False
    assert run["containers_left"] == []
    assert agent(prediction, "single_agent")["termination_reason"] == "agent_finish"


def test_the_evaluation_report_shows_the_usage_and_links_the_trajectories(agent_runs: dict[str, Any]) -> None:
    """evaluate.py's report carries each prediction's tokens, calls and time (summed per cell) and, read from the
    runner's own predictions.jsonl, links that open the agents' trajectories from the evaluation's run folder."""
    made = line(agent_runs, "scripted-gold", "serial_specialists")
    row = scored(agent_runs, "scripted-gold", "serial_specialists")
    assert (row["total_tokens"], row["model_calls"]) == (made["usage"]["total_tokens"], 4)
    (cell,) = [s for s in agent_runs["eval"].report["summary"]
               if (s["model_name_or_path"], s["protocol"]) == ("scripted-gold", "serial_specialists")]
    assert (cell["usage_reported"], cell["model_calls"], cell["total_tokens"]) == (1, 4, row["total_tokens"])
    assert "Tokens, model calls and time" in (agent_runs["eval"].run_dir / "report.html").read_text()
    assert "### Tokens, calls and time" in (agent_runs["eval"].run_dir / "report.md").read_text()
    # The evaluated file concatenates three runs' lines away from their run folders: no link would open, so none.
    assert row["trajectories"] == []
    run_dir = agent_runs["runs"]["scripted-gold"]["dir"]
    specialists = {"asyncodebench-demo:minicache": {"core_agent", "api_agent"}}
    file = read_predictions(run_dir / "predictions.jsonl", specialists, None)
    (prediction,) = [p for p in file.predictions if p.protocol == "serial_specialists"]
    links = trajectory_links(prediction, run_dir / "predictions.jsonl", agent_runs["eval"].run_dir)
    assert len(links) == 2 and all((agent_runs["eval"].run_dir / link).is_file() for link in links)


def test_every_scenario_has_a_timeline_checked_against_its_result(agent_runs: dict[str, Any], browser: Any) -> None:
    """Issue 32: each prediction's timeline.html shows, on one axis, every model response, the manager's actions,
    the merges and each dependency point's first passing steps (held to the result's DRS and CAIL), and passes the
    Chromium checks at 1280 and 390 px (helpers/timeline_checks.py)."""
    runs = [run["dir"] for run in agent_runs["runs"].values()]
    assert check_agent_run_pages(browser, agent_runs["eval"].run_dir, runs, "agents") == 8
