"""The manager of the manager protocols: a model loop that never touches code, whose replies are structured actions.

A manager reply carries one JSON object, alone or as the only ```json fenced block of the reply:

    {"actions": [
        {"type": "message", "to": "<agent>", "text": "..."},       a message to a specialist
        {"type": "handoff", "from": "<agent>", "to": "<agent>"},    a finished agent's artifact shown to another
        {"type": "rerun", "agent": "<agent>", "text": "..."}        another run of a finished agent, from the
    ]}                                                              integrated state, told `text`

An empty list is a valid "nothing to do". The reply is parsed strictly (`parse_actions`) and checked against the
team's state (`Team.check`): which actions the moment allows, agents that exist and are in the state the action
needs (a message reaches only a running agent; only a merged artifact is handed off or run again), rounds and
interventions left. A reply that fails either is rejected whole, recorded, and costs its response; the manager
is told why and asked again while its budget lasts. Model output is hostile: sizes and counts are bounded.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from asyncodebench.agents.adapter import (
    ADAPTER_COMPLETED,
    ITERATION_LIMIT,
    PROVIDER_ERROR,
    AgentRun,
    ModelEndpoint,
    Usage,
    now,
)
from asyncodebench.agents.cost import AgentCost, CostLimitReached
from asyncodebench.agents.model_client import EndpointError, ModelClient
from asyncodebench.agents.trajectory import TrajectoryWriter

MANAGER_ID = "manager"
MAX_REPLY_CHARS = 64_000
MAX_ACTIONS = 16
MAX_TEXT_CHARS = 4_000
MAX_ID_CHARS = 100
FIELDS = {"message": {"type", "to", "text"}, "handoff": {"type", "from", "to"}, "rerun": {"type", "agent", "text"}}
# What each moment of a protocol lets the manager do: before the specialists start, between offline rounds, and
# while specialists run (online).
PLAN, REVIEW, ONLINE = "plan", "review", "online"
ALLOWED = {PLAN: ("message",), REVIEW: ("rerun",), ONLINE: ("message", "handoff", "rerun")}
STATE_WORDS = {"waiting": "not started", "running": "running", "finished": "finished, its work not merged yet",
               "merged": "finished, its work merged"}
FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n```", re.DOTALL)


class ActionError(ValueError):
    """A manager reply that is not a valid action object; the message says what to send instead."""


@dataclass(frozen=True)
class Action:
    """One manager action: its type, the agent it concerns (`to`, or `agent` for a rerun), the agent whose artifact
    a handoff shows, and its text."""

    type: str
    target: str
    source: str = ""
    text: str = ""


def parse_actions(content: str | None) -> list[Action]:
    """The actions of a manager reply.

    Raises:
        ActionError: the reply holds no JSON object of the documented shape.
    """
    text = (content or "").strip()
    if not text:
        raise ActionError("the reply is empty; reply with a JSON object {\"actions\": [...]}")
    if len(text) > MAX_REPLY_CHARS:
        raise ActionError(f"the reply is longer than {MAX_REPLY_CHARS} characters")
    if not text.startswith("{"):
        blocks = FENCE.findall(text)
        if len(blocks) != 1:
            raise ActionError(f"the reply holds {len(blocks)} ```json blocks; give exactly one JSON object, alone or "
                              "in one ```json block")
        text = blocks[0].strip()
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ActionError(f"the JSON object does not parse ({exc})") from None
    if not isinstance(value, dict) or set(value) != {"actions"} or not isinstance(value["actions"], list):
        raise ActionError("give an object with exactly one key, \"actions\", holding a list")
    if len(value["actions"]) > MAX_ACTIONS:
        raise ActionError(f"at most {MAX_ACTIONS} actions per reply")
    return [_action(item, number) for number, item in enumerate(value["actions"], start=1)]


def _action(item: Any, number: int) -> Action:
    where = f"action {number}"
    if not isinstance(item, dict) or item.get("type") not in FIELDS:
        raise ActionError(f"{where}: give an object whose \"type\" is one of {', '.join(FIELDS)}")
    kind = item["type"]
    if set(item) != FIELDS[kind]:
        raise ActionError(f"{where}: a {kind} has exactly the keys {', '.join(sorted(FIELDS[kind]))}")
    for key in FIELDS[kind] - {"type"}:
        limit = MAX_TEXT_CHARS if key == "text" else MAX_ID_CHARS
        if not isinstance(item[key], str) or not item[key].strip() or len(item[key]) > limit:
            raise ActionError(f"{where}: \"{key}\" must be a non-empty string of at most {limit} characters")
    target = item["agent"] if kind == "rerun" else item["to"]
    return Action(kind, target, item.get("from", ""), item.get("text", ""))


@dataclass
class Team:
    """The specialists as the manager sees them: the protocol's state machine, without containers.

    An agent is `waiting` (not started), `running` (its loop takes messages), `finished` (its loop ended; its
    artifact is not merged yet) or `merged`; `runs` counts its runs (a rerun starts another, at most `max_runs`);
    each accepted action counts as one intervention (at most `max_interventions`, if set).
    """

    agents: tuple[str, ...]
    max_runs: int
    max_interventions: int | None = None
    state: dict[str, str] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    interventions: int = 0

    def __post_init__(self) -> None:
        self.state = {a: "waiting" for a in self.agents}
        self.runs = {a: 0 for a in self.agents}

    def start(self, agent: str) -> None:
        """The agent starts a run."""
        self.state[agent], self.runs[agent] = "running", self.runs[agent] + 1

    def finish(self, agent: str) -> None:
        """The agent's run ended (its artifact is merged next)."""
        self.state[agent] = "finished"

    def merged(self, agent: str) -> None:
        """The agent's artifact is merged into the integrated state."""
        self.state[agent] = "merged"

    @property
    def running(self) -> tuple[str, ...]:
        """The agents running now."""
        return tuple(a for a in self.agents if self.state[a] == "running")

    def check(self, actions: list[Action], moment: str) -> str | None:
        """Why `actions` cannot be carried out at `moment` (PLAN, REVIEW or ONLINE), or None when they can."""
        if self.max_interventions is not None and self.interventions + len(actions) > self.max_interventions:
            return (f"only {self.max_interventions - self.interventions} of the {self.max_interventions} "
                    "interventions are left")
        reruns: set[str] = set()
        for number, action in enumerate(actions, start=1):
            where = f"action {number} ({action.type})"
            if action.type not in ALLOWED[moment]:
                return f"{where}: now only {', '.join(ALLOWED[moment])} actions are possible"
            for agent in (action.target, action.source) if action.source else (action.target,):
                if agent not in self.state:
                    return f"{where}: there is no agent {agent!r}; the agents are {', '.join(self.agents)}"
            state = self.state[action.target]
            if action.type in ("message", "handoff") and moment == ONLINE and state != "running":
                return (f"{where}: {action.target} is not running ({STATE_WORDS[state]}); a message reaches only a "
                        "running agent, and is never delivered to one that has finished")
            if action.type == "handoff" and (self.state[action.source] != "merged" or action.source == action.target):
                return (f"{where}: only the merged artifact of another agent can be handed off; {action.source} is "
                        f"{STATE_WORDS[self.state[action.source]]}")
            if action.type == "rerun":
                if state != "merged" or action.target in reruns:
                    return (f"{where}: only a finished agent whose work is merged can be run again, once per reply; "
                            f"{action.target} is {STATE_WORDS[state]}")
                if self.runs[action.target] >= self.max_runs:
                    return f"{where}: {action.target} has used all its {self.max_runs} runs"
                reruns.add(action.target)
        return None


@dataclass(frozen=True)
class ManagerLimits:
    """The manager's budget: model responses per event and in total, total tokens (None: no limit), interventions
    (None: no limit), runs per specialist (`max_rounds_chat`), and its active seconds (the time it spends deciding)
    per event and in total (None: no limit)."""

    per_event: int
    total: int
    tokens: int | None
    interventions: int | None
    runs_per_agent: int
    seconds_per_event: int | None = None
    seconds_total: int | None = None

    @classmethod
    def of(cls, budget: dict[str, Any], override: int | None) -> ManagerLimits:
        """The limits a scenario row's `budget` gives, each capped by the runner's --budget when given."""
        per_event = int(budget["manager_max_iterations"])
        total = int(budget.get("manager_max_iterations_total") or per_event)
        if override:
            per_event, total = min(per_event, override), min(total, override)
        tokens, interventions = budget.get("manager_max_tokens_total"), budget.get("manager_max_interventions")
        per_event_seconds = budget.get("manager_max_active_seconds_per_event")
        total_seconds = budget.get("manager_max_active_seconds_total")
        return cls(per_event, total, int(tokens) if tokens else None,
                   int(interventions) if interventions is not None else None, int(budget.get("max_rounds_chat") or 1),
                   int(per_event_seconds) if per_event_seconds else None,
                   int(total_seconds) if total_seconds else None)

    def to_record(self) -> dict[str, Any]:
        """The limits as the scenario's events record them."""
        return {"unit": "model_response", "per_event": self.per_event, "total": self.total, "tokens": self.tokens,
                "interventions": self.interventions, "runs_per_agent": self.runs_per_agent,
                "active_seconds_per_event": self.seconds_per_event, "active_seconds_total": self.seconds_total}


Complete = Callable[[ModelEndpoint, list[dict[str, str]]], tuple[str | None, int, int]]


def complete(client: ModelClient, messages: list[dict[str, str]]) -> tuple[str | None, int, int]:
    """One chat completion through the run's model client (its retries and timeouts): the reply's text and its
    prompt and completion tokens.

    Raises:
        EndpointError: the endpoint could not answer (after the client's retries).
    """
    answer = client.complete({"messages": messages})
    choice = _dict(answer["choices"][0])
    message, usage = _dict(choice.get("message")), _dict(answer.get("usage"))
    content = message.get("content")
    return (content if isinstance(content, str) else None, _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class Manager:
    """One persistent manager conversation over a protocol's events, within its budget.

    `decide(prompt, moment)` asks for the actions of one event and returns the accepted ones ([] when the budget
    ran out or the model failed: the protocol goes on without the manager from then on, and a manager whose
    endpoint failed makes the scenario invalid, METRICS section 9). Every reply, rejection, retry and stop is
    written to the trajectory and, through `record`, to the scenario's events. `ask` replaces the model client
    (tests).

    The active time (seconds spent in `decide`, measured by `clock`) is bounded per event and in total, checked
    before each request: a request under way is not cut short (the model client bounds it), so an event may run
    over its limit by one request. The seconds of each decision and the total are recorded.
    """

    def __init__(self, endpoint: ModelEndpoint, limits: ManagerLimits, team: Team, system: str, trajectory: Path,
                 record: Callable[..., None], ask: Complete | None = None,
                 clock: Callable[[], float] = time.monotonic, cost: AgentCost | None = None) -> None:
        self.endpoint, self.limits, self.team, self.trajectory = endpoint, limits, team, trajectory
        self.clock_of = clock
        self.active_seconds = 0.0  # spent deciding, over all events
        self.writer = TrajectoryWriter(trajectory)
        self.client = ModelClient(endpoint, f"{trajectory.parent.parent.name} {MANAGER_ID}", self.writer.write,
                                  cost=cost)
        self.record = record
        self.ask: Complete = ask or (lambda _endpoint, messages: complete(self.client, messages))
        self.messages = [{"role": "system", "content": system}]
        self.writer.write("message", role="system", content=system)
        self.usage = Usage()
        self.stopped: str | None = None  # why the manager stopped (a termination reason), None while active
        self.detail = ""
        self.started_at, self.clock = now(), time.monotonic()

    def decide(self, prompt: str, moment: str) -> list[Action]:
        """The accepted actions for the event `prompt` describes ([] when none, or the manager is stopped)."""
        if self.stopped:
            return []
        began = self.clock_of()
        try:
            return self._decide(prompt, moment, began)
        finally:
            self.active_seconds += self.clock_of() - began

    def _decide(self, prompt: str, moment: str, began: float) -> list[Action]:
        self._say("user", prompt)
        for _ in range(self.limits.per_event):
            if self._out_of_budget() or self._out_of_time(moment, self.clock_of() - began):
                return []
            try:
                content, prompt_tokens, completion_tokens = self.ask(self.endpoint, self.messages)
            except EndpointError as exc:
                self._stop(exc.termination_reason, f"{type(exc).__name__}: {str(exc)[-2000:]}")
                return []
            except CostLimitReached as exc:  # the model's spending: the manager stops, the specialists go on
                self._stop(exc.termination_reason, str(exc), "manager_cost_exhausted")
                return []
            except Exception as exc:  # an injected `ask` may raise anything; the manager stops
                self._stop(PROVIDER_ERROR, f"{type(exc).__name__}: {str(exc)[-2000:]}")
                return []
            self.usage = self.usage + Usage(prompt_tokens, completion_tokens, 1)
            self.messages.append({"role": "assistant", "content": content or ""})
            self.writer.write("response", content=content, prompt_tokens=prompt_tokens,
                              completion_tokens=completion_tokens)
            try:
                actions = parse_actions(content)
                problem = self.team.check(actions, moment)
            except ActionError as exc:
                problem = str(exc)
            if problem is None:
                self.team.interventions += len(actions)
                self.record("manager_decision", moment=moment,
                            actions=[{"type": a.type, "target": a.target, "source": a.source or None}
                                     for a in actions], seconds=round(self.clock_of() - began, 3))
                return actions
            self.record("manager_action_rejected", moment=moment, problem=problem)
            self._say("user", f"Your reply was rejected and nothing was done: {problem}\nReply again with one JSON "
                              "object {\"actions\": [...]}.")
        self.record("manager_event_budget_used", moment=moment, responses=self.limits.per_event,
                    seconds=round(self.clock_of() - began, 3))
        return []

    def _out_of_budget(self) -> bool:
        tokens = self.usage.total_tokens
        if self.usage.responses >= self.limits.total or (self.limits.tokens and tokens >= self.limits.tokens):
            self._stop(ITERATION_LIMIT, f"{self.usage.responses} responses and {tokens} tokens used of the "
                                        f"manager's budget ({self.limits.total} responses, {self.limits.tokens} "
                                        "tokens)")
            return True
        return False

    def _out_of_time(self, moment: str, spent: float) -> bool:
        """Whether the active time is used up: in total (the manager stops) or for this event (it ends)."""
        total, per_event = self.limits.seconds_total, self.limits.seconds_per_event
        if total is not None and self.active_seconds + spent >= total:  # a budget of the row used, as tokens are
            self._stop(ITERATION_LIMIT, f"{self.active_seconds + spent:.3f} active seconds used of the manager's "
                                        f"{total}", "manager_time_exhausted")
            return True
        if per_event is not None and spent >= per_event:
            self.record("manager_event_time_used", moment=moment, seconds=round(spent, 3), limit=per_event)
            return True
        return False

    def _stop(self, reason: str, detail: str, event: str = "") -> None:
        self.stopped, self.detail = reason, detail
        event = event or ("manager_budget_exhausted" if reason == ITERATION_LIMIT else "manager_failed")
        self.record(event, termination_reason=reason, detail=detail)

    def _say(self, role: str, content: str) -> None:
        self.messages.append({"role": role, "content": content})
        self.writer.write("message", role=role, content=content)

    def finish(self) -> AgentRun:
        """Close the trajectory; the manager's run as the scenario records it."""
        reason = self.stopped or ADAPTER_COMPLETED
        usage = Usage(self.usage.prompt_tokens, self.usage.completion_tokens, self.usage.responses,
                      round(time.monotonic() - self.clock, 3))
        self.writer.write("summary", agent="manager", termination_reason=reason, detail=self.detail,
                          limits=self.limits.to_record(), interventions=self.team.interventions,
                          active_seconds=round(self.active_seconds, 3),
                          usage={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                                 "total_tokens": usage.total_tokens, "responses": usage.responses,
                                 "seconds": usage.seconds, "cost_usd": self.client.cost_usd},
                          model_calls={"retries": self.client.retries, "timeouts": self.client.timeouts,
                                       "limits": asdict(self.endpoint.limits)})
        self.writer.close()
        return AgentRun(MANAGER_ID, reason, reason, reason == ITERATION_LIMIT, usage, self.started_at, now(),
                        self.trajectory, self.detail, self.client.retries, self.client.timeouts,
                        self.client.cost_usd)
