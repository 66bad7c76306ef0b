"""What each agent is told: the task statement, its role and writable paths, the dependency contracts it is part
of, the tests to check its work with, the completed artifacts handed to it (serial protocol, and a manager's
rerun), and the manager's messages; and what the manager of the manager protocols is told (`manager_*`).

The final evaluator is never named as a stopping oracle (METRICS section 9): agents get their primary test
targets as a way to check their work, as upstream's instructions do.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from asyncodebench.dataset.protocols import MANAGER_PROTOCOLS
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
                handoffs: tuple[Handoff, ...] = (), messages: tuple[str, ...] = ()) -> str:
    """The whole task as `assignment`'s agent is told it in `scenario`, with the manager's `messages` to it."""
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
    if messages:
        parts += ["", "## Messages from your team's manager"]
        parts += [f"- {m.strip()}" for m in messages]
    parts += _native_build(spec)
    targets = assignment.get("primary_test_targets") or []
    if targets:
        command = shlex.join([spec.interpreter, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets])
        parts += ["", "## Checking your work", f"Run the tests of your part with: {command}"]
    return "\n".join(parts) + "\n"


def _native_build(spec: TaskSpec) -> list[str]:
    """How an agent on a task with native code builds it, as the evaluator will before it runs the tests
    (`spec.build`, from data/native_builds.yaml: the published rows do not carry the step)."""
    build = spec.build
    if build is None:
        return []
    command = shlex.join(build.command)
    return ["", "## Building the native code",
            f"The tests use native code built in {build.build_dir}/, which holds the build of the base state. After "
            f"changing native sources (or build files), and before running the tests, rebuild it in your current "
            f"folder with: {command}",
            f"The evaluator runs this same command before it runs the tests of your work. {build.build_dir}/ is "
            "never part of your changes: what you build there is not collected, so only source changes count."]


def _visibility(scenario: dict[str, Any]) -> str:
    """What an agent sees of its team's work, by the scenario's communication condition."""
    condition = scenario["communication_condition"]
    if condition == "completed_artifact_handoff":
        return ("You work one after another: you see the merged work of the agents before you; those after you "
                "will see yours.")
    if condition == "none_in_flight":
        return ("You all work at the same time in private copies of the repository and cannot see each other's "
                "changes; the copies are merged only after everyone has finished.")
    if scenario.get("online"):
        return ("You all work at the same time in private copies of the repository. A manager who does not write "
                "code follows your team: its messages, and the work of teammates it hands to you, appear in your "
                "observations while you work.")
    if scenario["protocol"] in MANAGER_PROTOCOLS:
        return ("You all work at the same time in private copies of the repository, merged when you finish. A "
                "manager who does not write code briefs you before you start and may run you again afterwards on "
                "the merged work of the team.")
    return f"Communication between agents: {condition}."



def manager_system(spec: TaskSpec, task_row: dict[str, Any], scenario: dict[str, Any]) -> str:
    """What the manager is told once: the task, the team, the contracts, and how to act."""
    online = bool(scenario.get("online"))
    parts = [
        f"You manage a team of specialists on AsynCodeBench task {spec.task_id}, scenario {scenario['scenario_id']} "
        f"({scenario['display_name']}). You never write or run code: you act only through your replies.",
        "", "## The task", task_row["problem_statement"].strip(), "", "## The team",
        *[f"- {a['agent_id']} ({a['role']}) owns {', '.join(a['writable_paths'])}" for a in scenario["assignments"]],
        "", "## Contracts between parts of the code",
        *[f"- {d.dependency_id} ({d.producer_agent or 'integrator'} -> {d.consumer_agent}): "
          f"{d.contract_summary.strip()}" for d in spec.dependencies],
        "", "## How you act",
        "Each of your replies is one JSON object, alone or in one ```json block: {\"actions\": [...]}, where an "
        "action is one of",
        '- {"type": "message", "to": AGENT, "text": TEXT}: '
        + ("the agent reads it with its next observation (only while it runs; before they start, it is part of "
           "their brief)." if online else "part of the agent's brief (only before the specialists start)."),
        *(['- {"type": "handoff", "from": AGENT, "to": AGENT}: show a finished agent\'s merged artifact (its diff) '
           "to a running agent."] if online else []),
        '- {"type": "rerun", "agent": AGENT, "text": TEXT}: run a finished agent again, starting from the merged '
        "work of the team, told TEXT" + ("." if online else " (only between rounds)."),
        'Reply {"actions": []} when nothing is needed. A reply that does not parse, or asks for what the moment '
        "does not allow, is rejected whole and still counts against your budget of replies.",
    ]
    return "\n".join(parts) + "\n"


def manager_event(title: str, lines: list[str], moment_help: str) -> str:
    """One event as the manager is told it: what happened, the team's state, what it may do now."""
    return "\n".join([f"## {title}", *lines, "", moment_help]) + "\n"
