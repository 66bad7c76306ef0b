"""The manager protocols end to end on the demo task: scripts/run_agents.py with the scripted model server, the
real agent loop and real containers, then evaluate.py on the predictions, whose scores are derived by hand below.

Two runs share one evaluation (a module fixture):
- `scripted-managers`: Async-RO-Manager (`caid_manager`): the manager tells the consumer to wait, the first round
  merges only the producer's core, the manager runs the consumer again on the merged work and it completes the
  task; Async-Manager (`async_manager`): the consumer waits for the producer's artifact, which the online manager
  hands to it when the producer finishes.
- `scripted-managers-trouble` (`--budget 20`): Async-RO-Manager with a manager whose every reply is malformed (its
  budget runs out, the specialists finish without it); Async-Manager with a stale consumer (it finishes before the
  producer has started its part; the manager then tells the producer to go on) and a manager that then uses up
  its budget.

Checkpoints are written in the order things happened (METRICS section 0), so the dependency timing is known:
all three demo dependencies have producer probes in tests/test_core.py and consumer and integrated probes that
need both halves.
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
    SUBMIT,
    apply,
    demo_patch,
    manager_reply,
    run_agents,
    waiting,
    write_scripts,
)
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import SCORING_FLAGS, EvalRun
from helpers.timeline_checks import check_agent_run_pages

from asyncodebench.dataset.validation import validator
from asyncodebench.scoring.provenance import Timeline, timeline_of

pytestmark = pytest.mark.docker

CAID, ONLINE = f"{DEMO_TASK}/caid_manager", f"{DEMO_TASK}/async_manager"
WAIT_TEXT = "Submit nothing this round: the core is not there yet."
RERUN_TEXT = "The core is merged now: implement memoize on it."
GO_TEXT = "api_agent is done: complete the LRU core now."
PRODUCER = [apply(demo_patch("producer_only")), SUBMIT]
CONSUMER = [apply(demo_patch("consumer_only")), SUBMIT]
MALFORMED = {"content": "Let us start with the core."}
MANAGERS: dict[str, list[Any]] = {
    f"{CAID}/manager": [
        manager_reply({"type": "message", "to": "api_agent", "text": WAIT_TEXT}),
        manager_reply({"type": "rerun", "agent": "api_agent", "text": RERUN_TEXT}),
        manager_reply(),
    ],
    f"{CAID}/core_agent": PRODUCER,
    f"{CAID}/api_agent": [SUBMIT, *CONSUMER],  # round 1: nothing; round 2 (the rerun): its part
    f"{ONLINE}/manager": [
        manager_reply(),
        manager_reply({"type": "handoff", "from": "core_agent", "to": "api_agent"}),
        manager_reply(),
    ],
    f"{ONLINE}/core_agent": PRODUCER,
    f"{ONLINE}/api_agent": [waiting("core_agent finished", apply(demo_patch("consumer_only"))), SUBMIT],
}
TROUBLE: dict[str, list[Any]] = {
    f"{CAID}/manager": [MALFORMED] * 20,
    f"{CAID}/core_agent": PRODUCER,
    f"{CAID}/api_agent": CONSUMER,
    f"{ONLINE}/manager": [manager_reply(), manager_reply({"type": "message", "to": "core_agent", "text": GO_TEXT}),
                          *[MALFORMED] * 18],
    f"{ONLINE}/core_agent": [waiting(GO_TEXT, apply(demo_patch("producer_only"))), SUBMIT],
    f"{ONLINE}/api_agent": CONSUMER,
}
FLAGS = ("--scenarios", "*/caid_manager,*/async_manager", "--max-workers", "2")
RUNS: dict[str, tuple[dict[str, list[Any]], tuple[str, ...]]] = {
    "scripted-managers": (MANAGERS, FLAGS), "scripted-managers-trouble": (TROUBLE, (*FLAGS, "--budget", "20"))}


@pytest.fixture(scope="module")
def manager_runs(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("manager-runs")
    runs, lines = {}, []
    for name, (scripts, flags) in RUNS.items():
        run_id = f"{name}-{secrets.token_hex(3)}"
        done = run_agents(write_scripts(out / f"{name}.json", scripts), demo_dataset.path, out, run_id,
                          "--name", name, *flags)
        assert done.returncode == 0, done.stderr[-3000:]
        predictions = out / run_id / "predictions.jsonl"
        runs[name] = {"dir": out / run_id, "containers_left": run_containers(run_id),
                      "lines": [json.loads(line) for line in predictions.read_text().splitlines()]}
        lines += predictions.read_text().splitlines()
    combined = out / "all.jsonl"
    combined.write_text("\n".join(lines) + "\n")
    evaluated = evaluate(combined, demo_dataset.path, *SCORING_FLAGS, "--max-workers", "2",
                         run_id=f"managers-eval-{secrets.token_hex(3)}")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    return {"runs": runs, "eval": evaluated}


def events(prediction: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(e["event"], e.get("agent_id")) for e in prediction["runner"]["events"]]


def trajectory(runs: dict[str, Any], name: str, relative: str) -> list[dict[str, Any]]:
    path = Path(runs["runs"][name]["dir"]) / relative
    return [json.loads(t) for t in path.read_text().splitlines()]


def run_of(prediction: dict[str, Any], agent_id: str, number: int = 1) -> dict[str, Any]:
    return [a for a in prediction["runner"]["agents"] if a["agent_id"] == agent_id][number - 1]


def test_every_prediction_is_valid_scored_and_left_no_container(manager_runs: dict[str, Any]) -> None:
    check = validator("prediction")
    made = [p for run in manager_runs["runs"].values() for p in run["lines"]]
    assert sorted(p["protocol"] for p in made) == ["async_manager", "async_manager", "caid_manager", "caid_manager"]
    for prediction in made:
        assert list(check.iter_errors(prediction)) == []
        assert prediction["checkpoints"][-1]["checkpoint_type"] == "final_integrated"
        assert prediction["checkpoints"][-1]["patch"] == prediction["model_patch"] == demo_patch("gold")
    counts = manager_runs["eval"].report["counts"]
    assert counts["evaluated"] == 4 and counts["infrastructure_errors"] == 0
    assert all(run["containers_left"] == [] for run in manager_runs["runs"].values())


def test_the_runners_merges_give_the_manager_protocols_their_merge_and_scope_rates(
        manager_runs: dict[str, Any]) -> None:
    # evaluate.py replays these lines' checkpoints and merges nothing, so the rates are the runner's record
    report = manager_runs["eval"].report
    for name, run in manager_runs["runs"].items():
        for made in run["lines"]:
            merges = made["runner"]["merges"]
            row = scored(manager_runs, name, made["protocol"])
            assert row["integration_source"] == "runner" and row["agents_integrated"] == len(merges) >= 2
            assert row["merge_conflicts"] == sum(m["merge_status"] == "conflict" for m in merges)
            assert row["scope_violations"] == sum(bool(m["out_of_scope"]) for m in merges)
            (cell,) = [r for r in report["summary"]
                       if (r["model_name_or_path"], r["protocol"]) == (name, made["protocol"])]
            assert cell["artifacts_reported_by_runner"] == len(merges)
            assert cell["merge_conflict_rate"] == row["merge_conflicts"] / len(merges)
            assert cell["scope_violation_rate"] == row["scope_violations"] / len(merges)
    assert any("runner's own record of its merges" in note for note in report["notes"])


@pytest.mark.parametrize("name, protocol, checkpoints, drs, cail", [
    # 1 core's artifact (producer probes pass), 2 its merge, 3 api's empty first run, 4 its merge (nothing), 5 api's
    # rerun workspace on the merged core (consumer probes pass), 6 its merge (integrated pass), 7 final.
    ("scripted-managers", "caid_manager", 7, 6.0, 4.0),
    # 1 core's artifact, 2 its merge, 3 api's private workspace (no core: consumer probes fail), 4 its merge, 5 final.
    ("scripted-managers", "async_manager", 5, 4.0, 3.0),
    # The manager never acted: the specialists' round is async_private's (T = 2n + 1).
    ("scripted-managers-trouble", "caid_manager", 5, 4.0, 3.0),
    # Stale consumer: 1 api's workspace without the core, 2 its merge (nothing passes), 3 core's artifact (producer
    # probes pass), 4 its merge (everything passes), 5 final: up 3, down 4.
    ("scripted-managers-trouble", "async_manager", 5, 4.0, 1.0),
])
def test_two_specialists_reach_gold_with_the_expected_dependency_timing(
        manager_runs: dict[str, Any], name: str, protocol: str, checkpoints: int, drs: float, cail: float) -> None:
    row = scored(manager_runs, name, protocol)
    assert (row["final_success"], row["pass_rate"], row["adpr"]) == (True, 1.0, 1.0)
    assert (row["checkpoint_count"], row["drs_penalized_mean"], row["cail_penalized_mean"]) == (checkpoints, drs, cail)


def test_the_offline_manager_briefs_then_reruns_the_consumer_on_the_merged_work(manager_runs: dict[str, Any]) -> None:
    prediction = line(manager_runs, "scripted-managers", "caid_manager")
    kinds = [(c["checkpoint_type"], c["agent_id"]) for c in prediction["checkpoints"]]
    assert kinds == [("agent_artifact", "core_agent"), ("integration_after_merge", "core_agent"),
                     ("agent_artifact", "api_agent"), ("integration_after_merge", "api_agent"),
                     ("agent_artifact", "api_agent"), ("integration_after_merge", "api_agent"),
                     ("final_integrated", None)]
    first, rerun = run_of(prediction, "api_agent", 1), run_of(prediction, "api_agent", 2)
    brief = trajectory(manager_runs, "scripted-managers", first["trajectory"])[1]["content"]
    assert "## Messages from your team's manager" in brief and WAIT_TEXT in brief
    told = trajectory(manager_runs, "scripted-managers", rerun["trajectory"])[1]["content"]
    assert RERUN_TEXT in told and "- core_agent (cache core specialist): clean, changed minicache/core.py" in told
    assert rerun["trajectory"].endswith("api_agent.run2.jsonl")
    assert ("rerun_requested", "api_agent") in events(prediction)
    manager = run_of(prediction, "manager")
    assert (manager["termination_reason"], manager["usage"]["responses"]) == ("adapter_completed", 3)


def test_the_online_manager_hands_the_producers_artifact_to_the_running_consumer(
        manager_runs: dict[str, Any]) -> None:
    prediction = line(manager_runs, "scripted-managers", "async_manager")
    order = events(prediction)
    handed = order.index(("artifact_handed_off", "api_agent"))
    assert order.index(("integration_after_merge", "core_agent")) < handed
    assert handed < order.index(("message_delivered", "api_agent")) < order.index(("agent_finished", "api_agent"))
    (event,) = [e for e in prediction["runner"]["events"] if e["event"] == "artifact_handed_off"]
    assert (event["source"], event["posted"]) == ("core_agent", True)
    lines = trajectory(manager_runs, "scripted-managers", run_of(prediction, "api_agent")["trajectory"])
    inbox = [i for i, t in enumerate(lines) if t["type"] == "inbox"]
    assert len(inbox) == 1 and "minicache/core.py" in lines[inbox[0]]["content"]
    # The consumer acted on it: its part was applied only after the hand-off reached it.
    applied = [i for i, t in enumerate(lines) if t["type"] == "observation" and "change.patch" in t["command"]]
    assert applied and applied[0] > inbox[0]


def test_a_manager_whose_budget_runs_out_stops_and_the_specialists_finish(manager_runs: dict[str, Any]) -> None:
    prediction = line(manager_runs, "scripted-managers-trouble", "caid_manager")
    order = events(prediction)
    assert order.count(("manager_action_rejected", None)) == 20
    assert ("manager_budget_exhausted", None) in order
    assert sorted(e[1] or "" for e in order if e[0] == "agent_finished") == ["api_agent", "core_agent"]
    assert ("rerun_requested", "api_agent") not in order and ("message_sent", "api_agent") not in order
    manager = run_of(prediction, "manager")
    assert (manager["termination_reason"], manager["iteration_cap_hit"], manager["usage"]["responses"]) == (
        "iteration_limit", True, 20)
    limits = next(e for e in prediction["runner"]["events"] if e["event"] == "manager_started")["limits"]
    assert (limits["per_event"], limits["total"], limits["runs_per_agent"]) == (20, 20, 2)


def test_a_stale_consumer_finishes_first_and_the_manager_wakes_the_producer(manager_runs: dict[str, Any]) -> None:
    prediction = line(manager_runs, "scripted-managers-trouble", "async_manager")
    order = events(prediction)
    finished = [e[1] for e in order if e[0] == "agent_finished"]
    assert finished == ["api_agent", "core_agent"]
    assert order.index(("message_sent", "core_agent")) < order.index(("message_delivered", "core_agent"))
    assert ("manager_budget_exhausted", None) in order
    limits = next(e for e in prediction["runner"]["events"] if e["event"] == "manager_started")["limits"]
    assert limits["interventions"] == 6 and limits["total"] == 20  # the row's 100 capped by --budget
    assert run_of(prediction, "manager")["usage"]["responses"] == 20


def test_the_runner_chains_its_checkpoints_to_its_trajectories(manager_runs: dict[str, Any]) -> None:
    """Each manager line's `runner.timeline` checks out against its own run folder (`recorded`); the combined file
    evaluated above lies elsewhere, away from the trajectories, so there the same lines are `self_reported`."""
    for run in manager_runs["runs"].values():
        folder = Path(run["dir"])
        for made in run["lines"]:
            timeline = timeline_of(made["checkpoints"], False, made["runner"]["timeline"],
                                   lambda path, folder=folder: (folder / path).read_bytes()
                                   if (folder / path).is_file() else None)
            assert timeline == Timeline("recorded"), timeline
            assert len(made["runner"]["timeline"]) == len(made["checkpoints"])
    for row in manager_runs["eval"].report["predictions"]:
        assert row["timeline_source"] == "self_reported" and "not beside" in row["timeline_reason"], row


def test_every_scenario_has_a_timeline_checked_against_its_result(manager_runs: dict[str, Any], browser: Any) -> None:
    """Issue 32: each prediction's timeline.html shows, on one axis, every model response, the manager's actions,
    the merges and each dependency point's first passing steps (held to the result's DRS and CAIL), and passes the
    Chromium checks at 1280 and 390 px (helpers/timeline_checks.py)."""
    runs = [run["dir"] for run in manager_runs["runs"].values()]
    assert check_agent_run_pages(browser, manager_runs["eval"].run_dir, runs, "managers") == 4
