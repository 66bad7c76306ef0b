"""What a protocol works with: the scenario, how its agents run (`Context`), one agent's run in a fresh container
(`run_agent`), the harness's integration of the artifacts so far (`integrate`), the events, and the outcome.

`protocols.py` (single, serial, async-private) and `managed.py` (the two manager protocols) build on these; keeping
them here lets both stand on one lower module instead of importing each other.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from asyncodebench.agents.adapter import AgentAdapter, AgentRun, AgentSpec, Inbox, ModelEndpoint, now
from asyncodebench.agents.container import Dropped, Recovery, WorkspaceLostError, WorkspacePatch, agent_workspace
from asyncodebench.agents.cost import ScenarioCost
from asyncodebench.agents.prompts import Handoff, instruction
from asyncodebench.agents.scope import out_of_scope
from asyncodebench.files import write_atomic
from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.integration import AgentMerge, Integration, plan_artifacts
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.scoring.patches import patch_bytes, patch_text, touched_paths


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
    budget override (None: the row's), the per-command time limit, the scenario's folder, where a line on each
    agent's start and end goes (the run's progress; None: nowhere), and the scenario's spending (None: not
    priced)."""

    bench: Workbench
    adapter: AgentAdapter
    endpoint: Callable[[str], ModelEndpoint]  # agent id -> endpoint
    budget: int | None
    command_timeout: float
    folder: Path
    progress: Callable[[str], None] | None = None
    cost: ScenarioCost | None = None


@dataclass(frozen=True)
class AgentOutcome:
    """One agent's run and its artifact: what it changed (text, as `patch_text` keeps bytes; a single agent's
    without the paths outside its writable paths), the changed paths outside its writable paths, why the artifact
    could not be read, if it could not, the times its container was made usable again (`container.Recovery`), the
    paths dropped from its patch, with why, and the commands spent against an exhausted container."""

    run: AgentRun
    patch: str
    out_of_scope: tuple[str, ...]
    patch_problem: str | None
    container: str
    recoveries: tuple[Recovery, ...] = ()
    dropped: tuple[Dropped, ...] = ()
    exhausted_commands: int = 0  # commands whose result came from an exhausted container (container.AgentWorkspace)


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
              label: str = "", keep_in_scope_only: bool = False) -> AgentOutcome:
    """Run one agent in a fresh container at `start` and read its artifact (what it changed from `start`; with
    `keep_in_scope_only`, a single agent's, only what is inside its writable paths). `messages` are the manager's
    to it, `inbox` brings more while it runs; `label` names its files (the agent id unless it runs again).

    Raises:
        SandboxUnavailableError: the container engine failed.
    """
    agent_id = assignment["agent_id"]
    label = label or agent_id
    writable = tuple(assignment["writable_paths"])
    spec = AgentSpec(agent_id, assignment["role"], writable,
                     instruction(scenario.spec, scenario.task_row, scenario.row, assignment, handoffs, messages),
                     ctx.endpoint(agent_id), ctx.folder / "trajectories" / f"{label}.jsonl", inbox,
                     ctx.cost.agent() if ctx.cost is not None else None)
    with agent_workspace(ctx.bench, start, ctx.command_timeout) as workspace:
        events.add("agent_started", agent_id=agent_id, container=workspace.container_name, run=label)
        _say(ctx, f"{label} started in {workspace.container_name}")
        workspace.writable = writable
        workspace.on_recovery = lambda r: events.add("workspace_recovered", agent_id=agent_id, run=label,
                                                     command_index=r.command_index, cause=r.cause)
        try:
            run = ctx.adapter.run(spec, workspace, budget(scenario, ctx.budget))
        finally:
            for text in inbox.close() if inbox is not None else []:
                events.add("message_undelivered", agent_id=agent_id, text=text[:200])
        events.add("agent_finished", agent_id=agent_id, termination_reason=run.termination_reason)
        _say(ctx, f"{label} finished: {run.termination_reason}, {run.usage.responses} responses, "
                  f"{run.usage.total_tokens} tokens, {run.usage.seconds:.0f} s")
        try:
            read = workspace.patch(writable, keep_in_scope_only)
        except WorkspaceLostError as exc:
            read = WorkspacePatch(b"", (), (), str(exc))
    patch = patch_text(read.raw)
    write_atomic(ctx.folder / "patches" / f"{label}.diff", read.raw)
    outside = tuple(dict.fromkeys((*read.out_of_scope, *out_of_scope(patch, writable))))
    events.add("agent_artifact", agent_id=agent_id, changed_paths=list(touched_paths(patch).paths),
               out_of_scope=list(outside), patch_problem=read.problem)
    return AgentOutcome(run, patch, outside, read.problem, workspace.container_name, tuple(workspace.recoveries),
                        read.dropped, workspace.exhausted_commands)


def _say(ctx: Context, text: str) -> None:
    if ctx.progress is not None:
        ctx.progress(text)


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
