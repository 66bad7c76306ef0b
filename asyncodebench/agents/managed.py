"""The two manager protocols: specialists at the same time in private containers, and a manager (`manager.py`)
that never writes code.

- `caid_manager` (Async-RO-Manager, offline, upstream's CAID manager): the manager briefs the specialists before they
  start (messages), they run from the base, their artifacts are merged in dependency order (as `async_private`);
  then, while chat rounds are left (`max_rounds_chat` runs per specialist), the manager reviews the merges and may
  run specialists again from the integrated state (the artifact hand-off), told what to fix; their new work is merged.
- `async_manager` (Async-Manager, online, its own budget): the manager briefs the specialists, then is woken each
  time one finishes, after its artifact is merged (completion order, one merge at a time), while the others still
  run: it may send a running specialist a message, hand it a finished one's merged artifact (the diff, in its next
  observation), or run a finished one again from the integrated state. Once its budget is used up it stops and the
  specialists finish without it. Before each decision the team's states are read from the agents themselves: one
  whose loop has ended (its inbox closed) is `finished` even while its artifact waits to be merged, so a message to
  it is refused with the reason; one that finishes between the decision and the post is told to the manager with
  the next event.

Checkpoints (METRICS section 0): per specialist run an `agent_artifact` (its own workspace: its start state plus
its changes) and an `integration_after_merge` (the integrated state after its merge, or unchanged when rejected),
in the order they happened, then `final_integrated`. The manager writes no patch, so there are no manager
checkpoints. Merges are the harness's (`Workbench.integrate`, scope violations rejected).
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable

from asyncodebench.agents.adapter import Inbox
from asyncodebench.agents.manager import (
    MANAGER_ID,
    ONLINE,
    PLAN,
    REVIEW,
    STATE_WORDS,
    Action,
    Manager,
    ManagerLimits,
    Team,
)
from asyncodebench.agents.prompts import Handoff, manager_event, manager_system
from asyncodebench.agents.team import AgentOutcome, Context, Events, Outcome, Scenario, run_agent
from asyncodebench.harness.integration import AgentArtifact, AgentMerge, merge_order
from asyncodebench.scoring.patches import patch_bytes, touched_paths

HANDOFF_CHARS = 8_000  # of an artifact's diff shown in a hand-off


@dataclass
class Board:
    """The integrated state (cumulative against the base), the checkpoints so far, and every merge."""

    integrated: str = ""
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    merges: list[AgentMerge] = field(default_factory=list)

    def outcome(self, agents: list[AgentOutcome], events: Events) -> Outcome:
        """The scenario's outcome once every run is merged."""
        events.add("final_integrated")
        final = {"checkpoint_type": "final_integrated", "workspace_kind": "integrated_workspace", "agent_id": None,
                 "patch": self.integrated}
        return Outcome(self.integrated, None, agents, self.merges, events.items, [*self.checkpoints, final])


def merge(ctx: Context, scenario: Scenario, board: Board, agent: AgentOutcome, start: str, events: Events) -> None:
    """Merge one run's changes (made from `start`) into the integrated state; add its two checkpoints."""
    agent_id = agent.run.agent_id
    workspace = _apply(ctx, start, agent)
    merged = workspace if start == board.integrated else _apply(ctx, board.integrated, agent)
    board.merges.append(merged)
    board.integrated = merged.integrated_state
    events.add("integration_after_merge", agent_id=agent_id, merge_status=merged.merge_status, reason=merged.reason,
               out_of_scope=list(merged.out_of_scope))
    board.checkpoints += [
        {"checkpoint_type": "agent_artifact", "workspace_kind": "agent_workspace", "agent_id": agent_id,
         "patch": workspace.agent_state},
        {"checkpoint_type": "integration_after_merge", "workspace_kind": "integrated_workspace", "agent_id": agent_id,
         "patch": merged.integrated_state}]


def _apply(ctx: Context, state: str, agent: AgentOutcome) -> AgentMerge:
    """The harness's serial integration of `state` then the agent's changes: the agent's workspace is `state` plus
    its changes, merged onto `state` (scope violations and conflicts leave `state` as it was)."""
    plan = [AgentArtifact("integrated", patch_bytes(state) if state else None, ()),
            AgentArtifact(agent.run.agent_id, patch_bytes(agent.patch) if agent.patch else None, agent.out_of_scope)]
    return ctx.bench.integrate("serial_specialists", plan).merges[1]


def handoff(agent: AgentOutcome, role: str, merged: AgentMerge | None) -> Handoff:
    """What a rerun agent is told of a finished run."""
    return Handoff(agent.run.agent_id, role, touched_paths(agent.patch).paths,
                   merged.merge_status if merged else "not merged", agent.run.termination_reason)


def team_lines(team: Team, agents: list[AgentOutcome], board: Board) -> list[str]:
    """The team's state as the manager reads it: each agent's state, runs, and its last run's merge."""
    last = {m.agent_id: m for m in board.merges}
    lines = []
    for agent_id in team.agents:
        runs = [a for a in agents if a.run.agent_id == agent_id]
        line = f"- {agent_id}: {STATE_WORDS[team.state[agent_id]]}, runs {team.runs[agent_id]} of {team.max_runs}"
        if runs and agent_id in last:
            changed = ", ".join(touched_paths(runs[-1].patch).paths) or "nothing"
            reason = f" ({last[agent_id].reason})" if last[agent_id].reason else ""
            line += (f"; its last run stopped by {runs[-1].run.termination_reason}, changed {changed}, merge "
                     f"{last[agent_id].merge_status}{reason}")
        lines.append(line)
    return lines


class Session:
    """What both protocols share: the scenario's context, events, team, manager and board."""

    def __init__(self, ctx: Context, scenario: Scenario) -> None:
        self.ctx, self.scenario, self.events, self.board = ctx, scenario, Events(), Board()
        self.by_agent = {a["agent_id"]: a for a in scenario.row["assignments"]}
        self.order = [a for a in merge_order(scenario.spec) if a in self.by_agent]
        limits = ManagerLimits.of(scenario.row["budget"], ctx.budget)
        self.team = Team(tuple(self.order), limits.runs_per_agent, limits.interventions)
        self.events.add("manager_started", limits=limits.to_record())
        self.manager = Manager(ctx.endpoint(MANAGER_ID), limits, self.team,
                               manager_system(scenario.spec, scenario.task_row, scenario.row),
                               ctx.folder / "trajectories" / f"{MANAGER_ID}.jsonl", self.events.add,
                               cost=ctx.cost.agent() if ctx.cost is not None else None)
        self.agents: list[AgentOutcome] = []

    def brief(self) -> dict[str, tuple[str, ...]]:
        """The manager's messages to each specialist before they start."""
        actions = self.manager.decide(manager_event("The specialists are about to start", team_lines(
            self.team, [], self.board), "Brief them with message actions, or reply {\"actions\": []}."), PLAN)
        briefs: dict[str, tuple[str, ...]] = {}
        for action in actions:
            briefs[action.target] = (*briefs.get(action.target, ()), action.text)
            self.events.add("message_sent", agent_id=action.target, moment=PLAN)
        return briefs

    def start(self, pool: ThreadPoolExecutor, agent_id: str, start: str, messages: tuple[str, ...] = (),
              inbox: Inbox | None = None) -> Future[AgentOutcome]:
        """Start a run of the agent from `start` (its first run, or a rerun with the hand-offs of the team)."""
        self.team.start(agent_id)
        run = self.team.runs[agent_id]
        last = {m.agent_id: m for m in self.board.merges}
        handoffs = tuple(handoff(a, self.by_agent[a.run.agent_id]["role"], last.get(a.run.agent_id))
                         for a in self.latest()) if run > 1 else ()
        return pool.submit(run_agent, self.ctx, self.scenario, self.by_agent[agent_id], patch_bytes(start),
                           self.events, handoffs, messages, inbox, agent_id if run == 1 else f"{agent_id}.run{run}")

    def refresh(self, inboxes: dict[str, Inbox]) -> None:
        """Mark `finished` each running agent whose loop has ended (its inbox closed), merged or not yet."""
        for agent_id in self.team.running:
            if agent_id in inboxes and inboxes[agent_id].closed:
                self.team.finish(agent_id)

    def latest(self) -> list[AgentOutcome]:
        """Each agent's last finished run."""
        return list({a.run.agent_id: a for a in self.agents}.values())

    def done(self) -> Outcome:
        """Close the manager (its run counts with the agents') and build the outcome."""
        self.events.add("manager_finished", active_seconds=round(self.manager.active_seconds, 3))
        run = self.manager.finish()
        manager = AgentOutcome(run, "", (), None, "")
        return self.board.outcome([*self.agents, manager], self.events)


def run_caid_manager(ctx: Context, scenario: Scenario) -> Outcome:
    """Brief, one round from the base merged in dependency order, then review rounds of reruns."""
    session = Session(ctx, scenario)
    briefs = session.brief()
    with ThreadPoolExecutor(max_workers=len(session.order), thread_name_prefix="agent") as pool:
        starts = {a: (session.start(pool, a, "", briefs.get(a, ())), "") for a in session.order}
        while starts:
            finished = {a: (future.result(), start) for a, (future, start) in starts.items()}
            for agent_id in session.order:  # merged in dependency order, as upstream's rounds are
                if agent_id in finished:
                    outcome, start = finished[agent_id]
                    session.team.finish(agent_id)
                    session.agents.append(outcome)
                    merge(ctx, scenario, session.board, outcome, start, session.events)
                    session.team.merged(agent_id)
            starts = {}
            if any(session.team.runs[a] < session.team.max_runs for a in session.order):
                for action in session.manager.decide(_review(session), REVIEW):
                    session.events.add("rerun_requested", agent_id=action.target, moment=REVIEW)
                    integrated = session.board.integrated
                    starts[action.target] = (session.start(pool, action.target, integrated, (action.text,)),
                                             integrated)
    return session.done()


def _review(session: Session) -> str:
    return manager_event("The round is merged", team_lines(session.team, session.agents, session.board),
                         "Run agents again with rerun actions (they start from the merged work), or reply "
                         "{\"actions\": []} to finish.")


def run_async_manager(ctx: Context, scenario: Scenario) -> Outcome:
    """Brief, every specialist from the base, then the online manager woken at each merge."""
    session = Session(ctx, scenario)
    briefs = session.brief()
    inboxes: dict[str, Inbox] = {}
    undelivered: list[str] = []  # actions posted too late, told to the manager with its next event
    slots = len(session.order) * session.team.max_runs
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="agent") as pool:
        running: dict[Future[AgentOutcome], tuple[str, str]] = {}

        def launch(agent_id: str, start: str, messages: tuple[str, ...]) -> None:
            inboxes[agent_id] = Inbox(_delivery(session.events, agent_id))
            running[session.start(pool, agent_id, start, messages, inboxes[agent_id])] = (agent_id, start)

        for agent_id in session.order:
            launch(agent_id, "", briefs.get(agent_id, ()))
        while running:
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: session.order.index(running[f][0])):
                agent_id, start = running.pop(future)
                outcome = future.result()
                session.team.finish(agent_id)
                session.agents.append(outcome)
                merge(ctx, scenario, session.board, outcome, start, session.events)
                session.team.merged(agent_id)
                session.refresh(inboxes)
                prompt, undelivered[:] = _woken(session, agent_id, undelivered), []
                for action in session.manager.decide(prompt, ONLINE):
                    _carry_out(session, action, inboxes, launch, undelivered)
    return session.done()


def _woken(session: Session, agent_id: str, undelivered: list[str]) -> str:
    late = "".join(f"Not delivered: {note}\n" for note in undelivered)
    return manager_event(f"{late}{agent_id} finished and its work is merged",
                         team_lines(session.team, session.agents, session.board),
                         "Message or hand artifacts to running agents, run finished ones again, or reply "
                         "{\"actions\": []}.")


def _delivery(events: Events, agent_id: str) -> Callable[[str], None]:
    return lambda text: events.add("message_delivered", agent_id=agent_id, text=text[:200])


def _carry_out(session: Session, action: Action, inboxes: dict[str, Inbox],
               launch: Callable[[str, str, tuple[str, ...]], None], undelivered: list[str]) -> None:
    """One accepted online action; a post the agent's inbox refuses (it finished after the decision) is noted in
    `undelivered` for the manager."""
    if action.type == "rerun":
        session.events.add("rerun_requested", agent_id=action.target, moment=ONLINE)
        launch(action.target, session.board.integrated, (action.text,))
        return
    if action.type == "handoff":
        (source,) = [a for a in session.latest() if a.run.agent_id == action.source]
        merged = next(m for m in reversed(session.board.merges) if m.agent_id == action.source)
        diff = source.patch if len(source.patch) <= HANDOFF_CHARS else source.patch[:HANDOFF_CHARS] + "\n[cut]\n"
        text = (f"{action.source} finished; its artifact ({merged.merge_status} into the integrated state) changed "
                f"{', '.join(touched_paths(source.patch).paths) or 'nothing'}. Code against it; do not edit its "
                f"files:\n{diff}")
        event = "artifact_handed_off"
    else:
        text, event = action.text, "message_sent"
    posted = inboxes[action.target].post(text)
    session.events.add(event, agent_id=action.target, source=action.source or MANAGER_ID, posted=posted)
    if not posted:
        session.team.finish(action.target)
        what = "the message" if action.type == "message" else f"the hand-off of {action.source}'s artifact"
        undelivered.append(f"{what} to {action.target}: it finished before it could read it.")


RUNNERS: dict[str, Callable[[Context, Scenario], Outcome]] = {
    "caid_manager": run_caid_manager, "async_manager": run_async_manager}
