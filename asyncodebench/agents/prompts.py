"""What each agent is told: the task statement, its role and writable paths, the dependency contracts it is part
of, the tests to check its work with, and (serial protocol) the completed artifacts handed to it.

The final evaluator is never named as a stopping oracle (METRICS section 9): agents get their primary test
targets as a way to check their work, as upstream's instructions do.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from asyncodebench.harness.spec import TaskSpec


@dataclass(frozen=True)
class Handoff:
    """A completed artifact an agent of a serial protocol is given: whose, what it changed, how it merged."""

    agent_id: str
    role: str
    changed_paths: tuple[str, ...]
    merge_status: str
    termination_reason: str


def instruction(spec: TaskSpec, task_row: dict[str, Any], scenario: dict[str, Any], assignment: dict[str, Any],
                handoffs: tuple[Handoff, ...] = ()) -> str:
    """The whole task as `assignment`'s agent is told it in `scenario`."""
    agent_id, writable = assignment["agent_id"], assignment["writable_paths"]
    team = [a for a in scenario["assignments"] if a["agent_id"] != agent_id]
    parts = [
        f"AsynCodeBench task {spec.task_id}, scenario {scenario['scenario_id']} ({scenario['display_name']}).",
        f"You are {agent_id}: {assignment['role']}.",
        "",
        "## The task",
        task_row["problem_statement"].strip(),
        "",
        "## Your workspace",
        f"The repository is checked out at {spec.workdir} (your current folder) at the task's base state"
        + (", with the completed work of the agents before you merged in." if handoffs else "."),
        "You may change only these paths; leave every other file as it is and remove any scratch file you create "
        "before you finish (a change elsewhere is a scope violation: "
        + ("your whole artifact is then rejected)." if team else "it is not kept)."),
        *[f"- {path}" for path in writable],
        "Do not commit: your changes are collected from the work tree when you finish.",
    ]
    if team:
        parts += ["", "## Your team"]
        parts += [f"- {a['agent_id']} ({a['role']}) owns {', '.join(a['writable_paths'])}" for a in team]
        parts.append(_visibility(scenario))
    contracts = [d for d in spec.dependencies if agent_id in (d.producer_agent, d.consumer_agent) or not team]
    if contracts:
        parts += ["", "## Contracts between parts of the code"]
        parts += [f"- {d.dependency_id} ({d.producer_agent or 'integrator'} -> {d.consumer_agent}): "
                  f"{d.contract_summary.strip()}" for d in contracts]
    if handoffs:
        parts += ["", "## Completed artifacts handed to you"]
        parts += [f"- {h.agent_id} ({h.role}): {h.merge_status}, changed {', '.join(h.changed_paths) or 'nothing'} "
                  f"(it stopped by {h.termination_reason})" for h in handoffs]
    targets = assignment.get("primary_test_targets") or []
    if targets:
        command = shlex.join([spec.interpreter, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets])
        parts += ["", "## Checking your work", f"Run the tests of your part with: {command}"]
    return "\n".join(parts) + "\n"


def _visibility(scenario: dict[str, Any]) -> str:
    """What an agent sees of its team's work, by the scenario's communication condition."""
    condition = scenario["communication_condition"]
    if condition == "completed_artifact_handoff":
        return ("You work one after another: you see the merged work of the agents before you; those after you "
                "will see yours.")
    if condition == "none_in_flight":
        return ("You all work at the same time in private copies of the repository and cannot see each other's "
                "changes; the copies are merged only after everyone has finished.")
    return f"Communication between agents: {condition}."
