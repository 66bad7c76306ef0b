"""The execution protocols, as the scenario rows define them (upstream's `reproductions/async-swe-agents` runner).

- `single`: one agent owning every writable path of the task, from the base; its in-scope edits are the patch.
- `serial_specialists`: the specialists one at a time in dependency order (producers first), each starting from
  the integrated result of those before it (completed-artifact hand-off), its artifact merged before the next.
- `async_private`: the specialists at the same time, each in a private container from the base, their artifacts
  merged in dependency order only after all have finished.
- `caid_manager` (Async-RO-Manager) and `async_manager` (Async-Manager): the specialists at the same time under a
  manager that never writes code and acts through structured messages, hand-offs and reruns (`managed.py`, the
  manager's loop and action format in `manager.py`). Their predictions carry the states the runner really had as
  explicit `checkpoints` (a rerun's states cannot be expressed by `agent_patches`).

Merging is the harness's (`Workbench.integrate`: a trusted container, `git apply` then a three-way apply, scope
violations rejected), the same code `evaluate.py` runs on the prediction's `agent_patches`, so the states handed
on here are the states the harness replays as checkpoints (METRICS section 0: per agent an `agent_artifact` and an
`integration_after_merge`, then `final_integrated`; T = 2n + 1). Events are recorded with their times.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from asyncodebench.agents.adapter import AgentAdapter, AgentRun, AgentSpec, Inbox, ModelEndpoint, now
from asyncodebench.agents.container import WorkspaceLostError, agent_workspace
from asyncodebench.agents.prompts import Handoff, instruction
from asyncodebench.agents.scope import out_of_scope, restrict
from asyncodebench.files import write_atomic
from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.integration import AgentMerge, Integration, merge_order, plan_artifacts
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.scoring.patches import patch_bytes, patch_text, touched_paths

IMPLEMENTED = ("single", "serial_specialists", "async_private", "caid_manager", "async_manager")
MANAGED = ("caid_manager", "async_manager")  # run by `managed.py`


@dataclass(frozen=True)
class Scenario:
    """One scenario row to run, with its task's row and spec."""

    row: dict[str, Any]
    task_row: dict[str, Any]
    spec: TaskSpec

    @property
    def protocol(self) -> str:
        """The scenario's protocol id."""
        return str(self.row["protocol"])


@dataclass(frozen=True)
class Context:
    """How a scenario's agents run: the task's workbench, the agent adapter, each agent's model endpoint, the
    budget override (None: the row's), the per-command time limit and the scenario's folder."""

    bench: Workbench
    adapter: AgentAdapter
    endpoint: Callable[[str], ModelEndpoint]  # agent id -> endpoint
    budget: int | None
    command_timeout: float
    folder: Path


@dataclass(frozen=True)
class AgentOutcome:
    """One agent's run and its artifact: everything it changed (text, as `patch_text` keeps bytes), the paths of
    it outside its writable paths, and why the artifact could not be read, if it could not."""

    run: AgentRun
    patch: str
    out_of_scope: tuple[str, ...]
    patch_problem: str | None
    container: str


@dataclass
class Outcome:
    """What a scenario produced: the final patch, the specialists' artifacts (None for `single` and the manager
    protocols), each agent run's outcome, the merges, the timed events and, for the manager protocols, the
    checkpoint states in the prediction's `checkpoints` shape (None: the harness derives them)."""

    model_patch: str
    agent_patches: dict[str, str] | None
    agents: list[AgentOutcome] = field(default_factory=list)
    merges: list[AgentMerge] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] | None = None


class Events:
    """The scenario's events with their times, from any thread."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def add(self, event: str, **fields: Any) -> None:
        """Record `event` now."""
        with self.lock:
            self.items.append({"event": event, "time": now(), **fields})


def budget(scenario: Scenario, override: int | None) -> int:
    """Model responses per agent run: the override, else the row's `subagent_max_iterations` (METRICS section 9)."""
    return override or int(scenario.row["budget"]["subagent_max_iterations"])


def run_agent(ctx: Context, scenario: Scenario, assignment: dict[str, Any], start: bytes, events: Events,
              handoffs: tuple[Handoff, ...] = (), messages: tuple[str, ...] = (), inbox: Inbox | None = None,
              label: str = "") -> AgentOutcome:
    """Run one agent in a fresh container at `start` and read its artifact (what it changed from `start`).
    `messages` are the manager's to it, `inbox` brings more while it runs; `label` names its files (the agent id
    unless it runs again).

    Raises:
        SandboxUnavailableError: the container engine failed.
    """
    agent_id = assignment["agent_id"]
    label = label or agent_id
    writable = tuple(assignment["writable_paths"])
    spec = AgentSpec(agent_id, assignment["role"], writable,
                     instruction(scenario.spec, scenario.task_row, scenario.row, assignment, handoffs, messages),
                     ctx.endpoint(agent_id), ctx.folder / "trajectories" / f"{label}.jsonl", inbox)
    with agent_workspace(ctx.bench, start, ctx.command_timeout) as workspace:
        events.add("agent_started", agent_id=agent_id, container=workspace.container_name, run=label)
        try:
            run = ctx.adapter.run(spec, workspace, budget(scenario, ctx.budget))
        finally:
            for text in inbox.close() if inbox is not None else []:
                events.add("message_undelivered", agent_id=agent_id, text=text[:200])
        events.add("agent_finished", agent_id=agent_id, termination_reason=run.termination_reason)
        try:
            raw, problem = workspace.patch()
        except WorkspaceLostError as exc:
            raw, problem = b"", str(exc)
    patch = patch_text(raw)
    write_atomic(ctx.folder / "patches" / f"{label}.diff", raw)
    outside = out_of_scope(patch, writable)
    events.add("agent_artifact", agent_id=agent_id, changed_paths=list(touched_paths(patch).paths),
               out_of_scope=list(outside), patch_problem=problem)
    return AgentOutcome(run, patch, outside, problem, workspace.container_name)


def run_single(ctx: Context, scenario: Scenario) -> Outcome:
    """One agent from the base; what it changed outside its writable paths is dropped from the final patch."""
    events = Events()
    (assignment,) = scenario.row["assignments"]
    agent = run_agent(ctx, scenario, assignment, b"", events)
    kept, _ = restrict(agent.patch, tuple(assignment["writable_paths"]))
    events.add("final_integrated")
    return Outcome(kept, None, [agent], events=events.items)


def run_serial(ctx: Context, scenario: Scenario) -> Outcome:
    """The specialists one after another, each from the integrated result of those before it."""
    events, outcome = Events(), Outcome("", {})
    integrated: bytes = b""
    handoffs: list[Handoff] = []
    by_agent = {a["agent_id"]: a for a in scenario.row["assignments"]}
    for agent_id in [a for a in merge_order(scenario.spec) if a in by_agent]:
        agent = run_agent(ctx, scenario, by_agent[agent_id], integrated, events, tuple(handoffs))
        outcome.agents.append(agent)
        integration = integrate(ctx, scenario, outcome.agents, events)
        integrated = patch_bytes(integration.final_state)
        merge = next(m for m in integration.merges if m.agent_id == agent_id)
        handoffs.append(Handoff(agent_id, by_agent[agent_id]["role"], touched_paths(agent.patch).paths,
                                merge.merge_status, agent.run.termination_reason))
        outcome.merges = list(integration.merges)
        outcome.model_patch = integration.final_state
    events.add("final_integrated")
    outcome.agent_patches = {a.run.agent_id: a.patch for a in outcome.agents}
    outcome.events = events.items
    return outcome


def run_async_private(ctx: Context, scenario: Scenario) -> Outcome:
    """The specialists at the same time from the base, each in its own container; merged after all finished."""
    events = Events()
    assignments = scenario.row["assignments"]
    with ThreadPoolExecutor(max_workers=len(assignments), thread_name_prefix="agent") as pool:
        futures = [pool.submit(run_agent, ctx, scenario, a, b"", events) for a in assignments]
        agents = [f.result() for f in futures]
    integration = integrate(ctx, scenario, agents, events)
    events.add("final_integrated")
    return Outcome(integration.final_state, {a.run.agent_id: a.patch for a in agents}, agents,
                   list(integration.merges), events.items)


def integrate(ctx: Context, scenario: Scenario, agents: list[AgentOutcome], events: Events) -> Integration:
    """The harness's integration of the artifacts so far (agents yet to run count as giving no patch); records an
    `integration_after_merge` event for each merge not recorded yet."""
    patches = {a.run.agent_id: patch_bytes(a.patch) for a in agents if a.patch}
    integration = ctx.bench.integrate(scenario.protocol, plan_artifacts(scenario.spec, patches))
    done = {e["agent_id"] for e in events.items if e["event"] == "integration_after_merge"}
    ran = {a.run.agent_id for a in agents}
    for merge in integration.merges:
        if merge.agent_id in ran and merge.agent_id not in done:
            events.add("integration_after_merge", agent_id=merge.agent_id, merge_status=merge.merge_status,
                       reason=merge.reason, out_of_scope=list(merge.out_of_scope))
    return integration


RUNNERS: dict[str, Callable[[Context, Scenario], Outcome]] = {
    "single": run_single, "serial_specialists": run_serial, "async_private": run_async_private}


def run_scenario(ctx: Context, scenario: Scenario) -> tuple[Outcome, float]:
    """Run the scenario's protocol; return its outcome and wall time in seconds.

    Raises:
        ValueError: the protocol is not implemented yet.
        SandboxUnavailableError: the container engine failed.
    """
    runners = dict(RUNNERS)
    if scenario.protocol in MANAGED:
        from asyncodebench.agents import managed  # it builds on this module

        runners.update(managed.RUNNERS)
    if scenario.protocol not in runners:
        raise ValueError(f"the protocol {scenario.protocol} is not implemented; choose among {IMPLEMENTED}")
    started = time.monotonic()
    outcome = runners[scenario.protocol](ctx, scenario)
    return outcome, round(time.monotonic() - started, 3)
