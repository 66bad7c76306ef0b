"""The online manager (`async_manager`) against the team's real state and its time budget, end to end on the demo
task: scripts/run_agents.py with the scripted model server, the real agent loop and real containers, then
evaluate.py on the predictions. One module fixture runs two scenarios, each from its own dataset folder:

- `scripted-refusal`: when the producer is merged, the manager sends it a message (it has finished: refused, the
  manager is told why and nothing is sent), then tells the waiting consumer to go on; the result is gold.
- `scripted-slow-manager`: the demo's rows with a manager time budget of 1 active second per event and 3 in all
  (`manager_max_active_seconds_per_event`, `_total`), a manager whose replies take 2 s each (the scripted server
  waits before answering) and are all malformed: the brief ends after one reply on its time, the first online
  event's reply uses the total, and the manager stops; the specialists finish without it.

No assertion depends on how fast anything runs: the replies take at least their 2 s, which is more than the limits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.agent_runs import evaluated_runs, line, scored, scripted_run
from helpers.agent_scripts import (
    DEMO_TASK,
    SUBMIT,
    apply,
    demo_patch,
    manager_reply,
    waiting,
)
from helpers.checkout import DEMO_DIR, PROTOCOLS_FILE
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import EvalRun

pytestmark = pytest.mark.docker

ONLINE = f"{DEMO_TASK}/async_manager"
GO_TEXT = "core_agent is merged: implement memoize on it now."
TOO_LATE = "Please also add a docstring."
PRODUCER = [apply(demo_patch("producer_only")), SUBMIT]
REFUSAL: dict[str, list[Any]] = {
    f"{ONLINE}/manager": [
        manager_reply(),  # the brief
        manager_reply({"type": "message", "to": "core_agent", "text": TOO_LATE}),  # core_agent has finished
        manager_reply({"type": "message", "to": "api_agent", "text": GO_TEXT}),
        manager_reply(),  # api_agent merged
    ],
    f"{ONLINE}/core_agent": PRODUCER,
    f"{ONLINE}/api_agent": [waiting(GO_TEXT, apply(demo_patch("consumer_only"))), SUBMIT],
}
SLOW_REPLY = {"content": "Let me think about the core first.", "seconds": 2}
SLOW: dict[str, list[Any]] = {
    f"{ONLINE}/manager": [SLOW_REPLY] * 3,  # only two are asked for: the brief's, and the first online event's
    f"{ONLINE}/core_agent": PRODUCER,
    f"{ONLINE}/api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
}
SECONDS_PER_EVENT, SECONDS_TOTAL = 1, 3


def slow_manager_dataset(demo: DemoDataset, out: Path) -> Path:
    """The demo's rows with the manager time budget above (the release's is 7200 s per event, 21600 in all)."""
    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows

    text = PROTOCOLS_FILE.read_text()
    for key, value in (("per_event", SECONDS_PER_EVENT), ("total", SECONDS_TOTAL)):
        (old,) = [ln for ln in text.splitlines() if ln.strip().startswith(f"manager_max_active_seconds_{key}:")]
        text = text.replace(old, f"{old.split(':')[0]}: {value}")
    protocols = out / "protocols.yaml"
    protocols.write_text(text)
    folder = out / "slow-manager-dataset"
    write_rows(build_task_rows(DEMO_DIR / "task.yaml", protocols, digest=demo.digest), folder)
    return folder


@pytest.fixture(scope="module")
def manager_runs(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("manager-limits")
    datasets = {"scripted-refusal": (REFUSAL, demo_dataset.path),
                "scripted-slow-manager": (SLOW, slow_manager_dataset(demo_dataset, out))}
    runs = {name: scripted_run(out, name, scripts, dataset, "--scenarios", ONLINE)
            for name, (scripts, dataset) in datasets.items()}
    return evaluated_runs(runs, out, demo_dataset.path, evaluate, "limits-eval")


def events_of(prediction: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e for e in prediction["runner"]["events"] if e["event"] == name]


def manager_trajectory(runs: dict[str, Any], name: str) -> list[dict[str, Any]]:
    (manager,) = [a for a in line(runs, name, "async_manager")["runner"]["agents"] if a["agent_id"] == "manager"]
    path = Path(runs["runs"][name]["dir"]) / manager["trajectory"]
    return [json.loads(t) for t in path.read_text().splitlines()]


def test_a_message_to_a_finished_agent_is_refused_and_the_manager_told_why(manager_runs: dict[str, Any]) -> None:
    prediction = line(manager_runs, "scripted-refusal", "async_manager")
    (rejected,) = events_of(prediction, "manager_action_rejected")
    assert "core_agent is not running (finished, its work merged)" in rejected["problem"]
    told = [t["content"] for t in manager_trajectory(manager_runs, "scripted-refusal") if t["type"] == "message"]
    assert any("Your reply was rejected" in c and "finished, its work merged" in c for c in told)
    assert any("core_agent: finished, its work merged" in c for c in told)  # the team's state as it was shown
    sent = [(e["agent_id"], e["posted"]) for e in events_of(prediction, "message_sent")]
    assert sent == [("api_agent", True)]  # nothing went to core_agent; nothing posted was lost
    assert events_of(prediction, "message_undelivered") == []
    row = scored(manager_runs, "scripted-refusal", "async_manager")
    assert row["final_success"] is True
    assert manager_runs["runs"]["scripted-refusal"]["containers_left"] == []


def test_the_rows_manager_time_budget_is_enforced_and_recorded(manager_runs: dict[str, Any]) -> None:
    prediction = line(manager_runs, "scripted-slow-manager", "async_manager")
    (started,) = events_of(prediction, "manager_started")
    assert (started["limits"]["active_seconds_per_event"], started["limits"]["active_seconds_total"]) == (
        SECONDS_PER_EVENT, SECONDS_TOTAL)
    (event_time,) = events_of(prediction, "manager_event_time_used")
    assert event_time["moment"] == "plan" and event_time["seconds"] >= 2 and event_time["limit"] == SECONDS_PER_EVENT
    (exhausted,) = events_of(prediction, "manager_time_exhausted")
    assert "active seconds used of the manager's 3" in exhausted["detail"]
    (manager,) = [a for a in prediction["runner"]["agents"] if a["agent_id"] == "manager"]
    assert (manager["termination_reason"], manager["usage"]["responses"]) == ("iteration_limit", 2)
    (finished,) = events_of(prediction, "manager_finished")
    assert finished["active_seconds"] >= 4
    summary = manager_trajectory(manager_runs, "scripted-slow-manager")[-1]
    assert summary["type"] == "summary" and summary["active_seconds"] == finished["active_seconds"]
    row = scored(manager_runs, "scripted-slow-manager", "async_manager")
    assert row["final_success"] is True  # the specialists finished without the manager
