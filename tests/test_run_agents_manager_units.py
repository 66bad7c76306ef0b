"""The manager protocols' pure parts, without containers: the action parser, the team's state machine, the
manager's budget loop (its model answered by a plain function), the inbox that carries messages to a running agent,
and the scripted server's waiting replies."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from asyncodebench.agents.adapter import Inbox, ModelEndpoint
from asyncodebench.agents.manager import (
    MAX_ACTIONS,
    ONLINE,
    PLAN,
    REVIEW,
    Action,
    ActionError,
    Manager,
    ManagerLimits,
    Team,
    parse_actions,
)
from asyncodebench.agents.scripted_server import WAIT_COMMAND, ScriptedServer, parse_scripts

AGENTS = ("core_agent", "api_agent")


def reply(*actions: dict[str, str]) -> str:
    return json.dumps({"actions": list(actions)})


def test_actions_parse_alone_or_in_one_fenced_block() -> None:
    message = {"type": "message", "to": "api_agent", "text": "wait"}
    assert parse_actions(reply(message)) == [Action("message", "api_agent", "", "wait")]
    handoff = reply({"type": "handoff", "from": "core_agent", "to": "api_agent"})
    fenced = f"I will hand it over.\n```json\n{handoff}\n```"
    assert parse_actions(fenced) == [Action("handoff", "api_agent", "core_agent", "")]
    assert parse_actions(reply({"type": "rerun", "agent": "api_agent", "text": "again"})) == [
        Action("rerun", "api_agent", "", "again")]
    assert parse_actions(' {"actions": []} ') == []


@pytest.mark.parametrize("content, problem", [
    (None, "empty"),
    ("Let us start with the core.", "0 ```json blocks"),
    ("```json\n{}\n```\n```json\n{}\n```", "2 ```json blocks"),
    ("{\"actions\": [}", "does not parse"),
    ("{\"actions\": {}}", "holding a list"),
    ("{\"actions\": [], \"why\": \"x\"}", "exactly one key"),
    (reply({"type": "delete", "to": "api_agent"}), "one of message, handoff, rerun"),
    (reply({"type": "message", "to": "api_agent"}), "exactly the keys text, to, type"),
    (reply({"type": "message", "to": "api_agent", "text": "x", "cc": "core_agent"}), "exactly the keys"),
    (json.dumps({"actions": [{"type": "message", "to": 7, "text": "x"}]}), "\"to\" must be a non-empty string"),
    (reply({"type": "message", "to": "api_agent", "text": " "}), "\"text\" must be a non-empty string"),
    (reply({"type": "message", "to": "api_agent", "text": "x" * 4001}), "at most 4000 characters"),
    (reply(*[{"type": "message", "to": "api_agent", "text": "x"}] * (MAX_ACTIONS + 1)), f"at most {MAX_ACTIONS}"),
    ("{" + " " * 64_001 + "}", "longer than"),
])
def test_malformed_replies_are_refused_saying_what_to_send(content: str | None, problem: str) -> None:
    with pytest.raises(ActionError, match=re.escape(problem)):
        parse_actions(content)


def test_the_team_allows_what_each_moment_allows() -> None:
    team = Team(AGENTS, max_runs=2)
    message = Action("message", "api_agent", "", "wait")
    assert team.check([message], PLAN) is None  # a brief before anyone runs
    assert "only message" in (team.check([Action("rerun", "api_agent", "", "x")], PLAN) or "")
    assert "no agent 'ghost'" in (team.check([Action("message", "ghost", "", "x")], PLAN) or "")
    team.start("core_agent")
    team.start("api_agent")
    assert team.running == AGENTS
    assert "only a finished agent whose work is merged" in (
        team.check([Action("rerun", "api_agent", "", "x")], ONLINE) or "")
    assert "only the merged artifact of another agent" in (
        team.check([Action("handoff", "api_agent", "core_agent", "")], ONLINE) or "")
    team.finish("core_agent")  # its loop ended; its artifact is not merged yet
    unmerged = "core_agent is not running (finished, its work not merged yet)"
    assert unmerged in (team.check([Action("message", "core_agent", "", "x")], ONLINE) or "")
    assert "core_agent is finished, its work not merged yet" in (
        team.check([Action("handoff", "api_agent", "core_agent", "")], ONLINE) or "")
    assert "core_agent is finished, its work not merged yet" in (
        team.check([Action("rerun", "core_agent", "", "x")], ONLINE) or "")
    team.merged("core_agent")
    assert team.check([Action("handoff", "api_agent", "core_agent", ""), message], ONLINE) is None
    assert "core_agent is not running (finished, its work merged)" in (
        team.check([Action("message", "core_agent", "", "x")], ONLINE) or "")
    assert team.check([Action("rerun", "core_agent", "", "x")], ONLINE) is None
    assert "once per reply" in (team.check([Action("rerun", "core_agent", "", "x")] * 2, ONLINE) or "")
    assert "only rerun" in (team.check([message], REVIEW) or "")
    team.start("core_agent")  # its second run
    team.finish("core_agent")
    team.merged("core_agent")
    assert "used all its 2 runs" in (team.check([Action("rerun", "core_agent", "", "x")], REVIEW) or "")


def test_interventions_are_counted_against_the_limit() -> None:
    team = Team(AGENTS, max_runs=2, max_interventions=2)
    brief = [Action("message", "core_agent", "", "a"), Action("message", "api_agent", "", "b")]
    assert team.check(brief, PLAN) is None
    team.interventions = 1
    assert "only 1 of the 2 interventions are left" in (team.check(brief, PLAN) or "")


def test_the_manager_budget_comes_from_the_row_capped_by_the_runners_budget() -> None:
    row = {"manager_max_iterations": 30, "manager_max_iterations_total": 100, "manager_max_tokens_total": 8_000_000,
           "manager_max_interventions": 6, "max_rounds_chat": 2}
    assert ManagerLimits.of(row, None) == ManagerLimits(30, 100, 8_000_000, 6, 2)
    assert ManagerLimits.of(row, 20) == ManagerLimits(20, 20, 8_000_000, 6, 2)
    standard = {"manager_max_iterations": 100, "manager_max_iterations_total": None, "manager_max_tokens_total": None,
                "manager_max_interventions": None, "max_rounds_chat": 2}
    assert ManagerLimits.of(standard, None) == ManagerLimits(100, 100, None, None, 2)


class Scripted:
    """A manager model answering from a list; records what it was asked."""

    def __init__(self, *replies: str, fail: bool = False) -> None:
        self.replies, self.fail = list(replies), fail
        self.asked: list[list[str]] = []

    def __call__(self, endpoint: ModelEndpoint, messages: list[dict[str, str]]) -> tuple[str | None, int, int]:
        if self.fail:
            raise ConnectionError("the endpoint is down")
        self.asked.append([m["content"] for m in messages])
        return self.replies.pop(0), 10, 2


def manager(tmp_path: Path, ask: Scripted, limits: ManagerLimits, team: Team | None = None
            ) -> tuple[Manager, list[tuple[str, dict[str, Any]]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    made = Manager(ModelEndpoint("m"), limits, team or Team(AGENTS, 2), "system", tmp_path / "manager.jsonl",
                   lambda event, **fields: events.append((event, fields)), ask)
    return made, events


def test_a_rejected_reply_costs_a_response_and_the_manager_is_told_why(tmp_path: Path) -> None:
    ask = Scripted("not json", reply({"type": "message", "to": "api_agent", "text": "wait"}))
    made, events = manager(tmp_path, ask, ManagerLimits(5, 10, None, None, 2))
    assert made.decide("brief them", PLAN) == [Action("message", "api_agent", "", "wait")]
    assert [e for e, _ in events] == ["manager_action_rejected", "manager_decision"]
    assert "Your reply was rejected and nothing was done" in ask.asked[1][-1]
    run = made.finish()
    assert (run.termination_reason, run.usage.responses, run.usage.prompt_tokens) == ("adapter_completed", 2, 20)
    kinds = [json.loads(t)["type"] for t in (tmp_path / "manager.jsonl").read_text().splitlines()]
    assert kinds == ["message", "message", "response", "message", "response", "summary"]


def test_the_per_event_limit_ends_an_event_and_the_total_stops_the_manager(tmp_path: Path) -> None:
    made, events = manager(tmp_path, Scripted(*["no"] * 5), ManagerLimits(2, 3, None, None, 2))
    assert made.decide("event 1", PLAN) == []
    assert [e for e, _ in events][-1] == "manager_event_budget_used" and made.stopped is None
    assert made.decide("event 2", PLAN) == []  # one response left, rejected, then the total is used up
    assert made.stopped == "iteration_limit" and [e for e, _ in events][-1] == "manager_budget_exhausted"
    assert made.decide("event 3", PLAN) == []  # stopped: not asked again
    run = made.finish()
    assert (run.usage.responses, run.iteration_cap_hit) == (3, True)


class Clock:
    """A clock the manager reads; each model answer moves it on by `step` seconds (no real time passes)."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now


def timed_manager(tmp_path: Path, limits: ManagerLimits, step: float
                  ) -> tuple[Manager, list[tuple[str, dict[str, Any]]], Scripted]:
    clock, ask = Clock(step), Scripted(*["no"] * 20)

    def answer(endpoint: ModelEndpoint, messages: list[dict[str, str]]) -> tuple[str | None, int, int]:
        clock.now += clock.step
        return ask(endpoint, messages)

    events: list[tuple[str, dict[str, Any]]] = []
    made = Manager(ModelEndpoint("m"), limits, Team(AGENTS, 2), "system", tmp_path / "manager.jsonl",
                   lambda event, **fields: events.append((event, fields)), answer, clock)
    return made, events, ask


def test_the_active_seconds_per_event_end_an_event_and_are_recorded(tmp_path: Path) -> None:
    # 10 responses allowed per event, but each answer takes 4 s of a 10 s event: the third is the last asked.
    made, events, ask = timed_manager(tmp_path, ManagerLimits(10, 100, None, None, 2, 10, None), step=4)
    assert made.decide("event 1", PLAN) == []
    assert len(ask.asked) == 3 and made.stopped is None
    assert events[-1] == ("manager_event_time_used", {"moment": PLAN, "seconds": 12, "limit": 10})
    assert made.decide("event 2", PLAN) == [] and len(ask.asked) == 6  # the next event has its own 10 s
    made.finish()
    summary = json.loads((tmp_path / "manager.jsonl").read_text().splitlines()[-1])
    assert summary["active_seconds"] == 24 and summary["limits"]["active_seconds_per_event"] == 10


def test_the_active_seconds_in_total_stop_the_manager(tmp_path: Path) -> None:
    made, events, ask = timed_manager(tmp_path, ManagerLimits(10, 100, None, None, 2, None, 10), step=4)
    assert made.decide("event 1", PLAN) == []
    assert len(ask.asked) == 3 and made.stopped == "iteration_limit"
    assert events[-1][0] == "manager_time_exhausted"
    assert made.decide("event 2", PLAN) == [] and len(ask.asked) == 3  # stopped: not asked again
    run = made.finish()
    assert run.iteration_cap_hit and "12.000 active seconds used of the manager's 10" in run.detail


def test_the_row_gives_the_managers_time_budget() -> None:
    row = {"manager_max_iterations": 30, "manager_max_active_seconds_per_event": 7200,
           "manager_max_active_seconds_total": 21600}
    limits = ManagerLimits.of(row, None)
    assert (limits.seconds_per_event, limits.seconds_total) == (7200, 21600)
    assert limits.to_record()["active_seconds_total"] == 21600


def test_a_failing_endpoint_stops_the_manager(tmp_path: Path) -> None:
    made, events = manager(tmp_path, Scripted(fail=True), ManagerLimits(2, 3, None, None, 2))
    assert made.decide("event", PLAN) == []
    assert events[-1][0] == "manager_failed" and "ConnectionError" in events[-1][1]["detail"]
    assert made.finish().termination_reason == "provider_or_transport_error"


def test_the_inbox_delivers_between_steps_and_refuses_after_the_agent_finished() -> None:
    delivered: list[str] = []
    inbox = Inbox(delivered.append)
    assert inbox.post("one") and inbox.post("two")
    assert inbox.take() == ["one", "two"] and delivered == ["one", "two"]
    assert inbox.take() == []
    assert inbox.post("late") and not inbox.closed
    assert inbox.close() == ["late"]  # never taken: undelivered
    assert inbox.closed and inbox.post("after") is False


def test_a_waiting_scripted_reply_sleeps_until_its_text_arrives() -> None:
    scripts = parse_scripts({"api_agent": [{"after": "core is merged", "commands": ["make"]}, "done"]})
    with ScriptedServer(scripts) as server:
        assert server.next_reply("t/p/api_agent", "nothing yet").commands == (WAIT_COMMAND,)
        assert server.next_reply("t/p/api_agent", "the core is merged now").commands == ("make",)
        assert server.next_reply("t/p/api_agent", "").commands == ("done",)
