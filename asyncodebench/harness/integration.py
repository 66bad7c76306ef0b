"""Integrate specialists' patches the way the official checkpoint model does, and derive its checkpoints.

The host decides the merge order (producers before consumers) and each artifact's scope (pure, below); a container
in which no evaluated code runs does the merging (`incontainer/integrate.py`, driven by `evaluation.Workbench`) and
hands back every workspace state as a cumulative diff, which is then replayed like any other checkpoint: per agent
an `agent_artifact` state (its own workspace) and an `integration_after_merge` state, then the `final_integrated`
state. T = 2n + 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Any

from asyncodebench.dataset.protocols import INTEGRATED_PROTOCOLS as INTEGRATED_PROTOCOLS  # named here for callers
from asyncodebench.dataset.protocols import SERIAL_PROTOCOLS as SERIAL_PROTOCOLS
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.scoring.patches import outside_scope, patch_text, touched_paths


@dataclass(frozen=True)
class AgentArtifact:
    """One specialist's patch and what the host decided about it."""

    agent_id: str
    patch: bytes | None  # None when the prediction gave no patch for this agent
    out_of_scope: tuple[str, ...]  # paths it touches outside its writable paths: a scope violation

    @property
    def scope_ok(self) -> bool:
        """Whether the patch stays within the agent's writable paths."""
        return not self.out_of_scope


@dataclass(frozen=True)
class AgentMerge:
    """How one artifact fared: its merge status (clean | conflict | missing_input | error) and the strategy used."""

    agent_id: str
    merge_status: str
    strategy: str | None
    reason: str | None  # scope_violation | merge_conflict | patch_did_not_apply | no patch from this agent
    out_of_scope: tuple[str, ...]
    agent_state: str  # cumulative diff of the agent's workspace against the canonical base
    integrated_state: str  # cumulative diff of the integrated workspace after this merge


@dataclass(frozen=True)
class Integration:
    """How the agents' patches were integrated: each merge in merge order, then the final integrated state (a
    cumulative diff against the canonical base)."""

    protocol: str
    merges: tuple[AgentMerge, ...]
    final_state: str

    @property
    def conflicts(self) -> int:
        """The number of merges that ended in a conflict."""
        return sum(m.merge_status == "conflict" for m in self.merges)

    @property
    def scope_violations(self) -> int:
        """The number of agents whose patch touched paths outside their scope."""
        return sum(bool(m.out_of_scope) for m in self.merges)


def merge_order(spec: TaskSpec) -> list[str]:
    """Specialists with producers before their consumers; ties (and cycles) keep the task's specialist order."""
    agents = [a.agent_id for a in spec.specialists]
    graph: dict[str, set[str]] = {a: set() for a in agents}
    for dep in spec.dependencies:
        if dep.producer_agent in graph and dep.consumer_agent in graph and dep.producer_agent != dep.consumer_agent:
            graph[dep.consumer_agent].add(dep.producer_agent)
    sorter = TopologicalSorter(graph)
    try:
        sorter.prepare()
    except CycleError:
        return agents
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=agents.index)
        order += ready
        sorter.done(*ready)
    return order


def plan_artifacts(spec: TaskSpec, agent_patches: dict[str, bytes]) -> list[AgentArtifact]:
    """Each specialist's artifact in merge order, with its out-of-scope paths."""
    writable = {a.agent_id: a.writable_paths for a in spec.specialists}
    plan = []
    for agent_id in merge_order(spec):
        patch = agent_patches.get(agent_id)
        touched = touched_paths(patch_text(patch)).paths if patch else ()
        plan.append(AgentArtifact(agent_id, patch, outside_scope(touched, writable[agent_id])))
    return plan


def integration_from_record(protocol: str, plan: list[AgentArtifact], record: dict[str, Any]) -> Integration:
    """The integration `incontainer/integrate.py` recorded, with each agent's out-of-scope paths from the plan."""
    scope = {a.agent_id: a.out_of_scope for a in plan}
    merges = tuple(
        AgentMerge(m["agent_id"], m["merge_status"], m["strategy"], m["reason"], scope[m["agent_id"]],
                   m["agent_state"], m["integrated_state"])
        for m in record["agents"]
    )
    return Integration(protocol, merges, record["final_state"])
