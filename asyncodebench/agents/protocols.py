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

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from asyncodebench.agents import managed
from asyncodebench.agents.prompts import Handoff
from asyncodebench.agents.scope import restrict
from asyncodebench.agents.team import Context, Events, Outcome, Scenario, integrate, run_agent
from asyncodebench.dataset.protocols import PROTOCOLS
from asyncodebench.harness.integration import merge_order
from asyncodebench.scoring.patches import patch_bytes, touched_paths


def run_single(ctx: Context, scenario: Scenario) -> Outcome:
    """One agent from the base; what it changed outside its writable paths is dropped from the final patch."""
    events = Events()
    (assignment,) = scenario.row["assignments"]
    agent = run_agent(ctx, scenario, assignment, b"", events, keep_in_scope_only=True)
    kept, _ = restrict(agent.patch, tuple(assignment["writable_paths"]))  # already so; the text rule as a check
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


RUNNERS: dict[str, Callable[[Context, Scenario], Outcome]] = {
    "single": run_single, "serial_specialists": run_serial, "async_private": run_async_private}
# the protocols (`dataset.protocols`, release order) with a runner here or, for the manager ones, in `managed.py`
IMPLEMENTED = tuple(p for p in PROTOCOLS if p in RUNNERS or p in managed.RUNNERS)


def run_scenario(ctx: Context, scenario: Scenario) -> tuple[Outcome, float]:
    """Run the scenario's protocol; return its outcome and wall time in seconds.

    Raises:
        ValueError: the protocol is not implemented yet.
        SandboxUnavailableError: the container engine failed.
    """
    runners = {**RUNNERS, **managed.RUNNERS}
    if scenario.protocol not in runners:
        raise ValueError(f"the protocol {scenario.protocol} is not implemented; choose among {IMPLEMENTED}")
    started = time.monotonic()
    outcome = runners[scenario.protocol](ctx, scenario)
    return outcome, round(time.monotonic() - started, 3)
