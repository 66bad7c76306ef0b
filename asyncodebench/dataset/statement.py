"""Compose a task's full problem statement: our prose plus the sections derived from the task's facts.

The prose (`data/tasks/<name>.md`) says what the library does and what is missing. The rules an agent must follow
(which files it may edit, that tests are the evaluation, how the evaluator runs) come from the facts, so they can
never drift from what the harness enforces.
"""

from __future__ import annotations

import shlex
from typing import Any

from asyncodebench.dataset.targets import target_files, target_options

FINAL_TIMEOUT_SECONDS = 900


def compose_statement(task: dict[str, Any], prose: str) -> str:
    """Return the complete prompt for `task` given its prose."""
    title = f"# Task {task.get('task_id')}: {task.get('repo')} at {str(task.get('base_revision'))[:12]}"
    sections = [title, prose.strip(), _editing_rules(task), _tests_section(task), _evaluator_section(task)]
    return "\n\n".join(sections) + "\n"


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- `{item}`" for item in items)


def _editing_rules(task: dict[str, Any]) -> str:
    lines = [
        "## Files you may edit",
        "",
        "Working alone, you may change only these files:",
        "",
        _bullets(task.get("single_agent_writable_paths") or []),
        "",
        "In a multi-agent protocol each specialist may change only the files of its own assignment:",
        "",
    ]
    for agent in task.get("specialists") or []:
        paths = ", ".join(f"`{p}`" for p in agent.get("writable_paths") or [])
        lines.append(f"- `{agent.get('agent_id')}` ({agent.get('role')}): {paths}")
    lines += ["", "Edits outside these paths are rejected as scope violations when agents' patches are integrated."]
    return "\n".join(lines)


def _tests_section(task: dict[str, Any]) -> str:
    targets = task.get("test_targets") or []
    lines = [
        "## Tests",
        "",
        "The existing tests are the evaluation. Do not edit, add or delete tests, `conftest.py` files or pytest",
        *_restored_from(bool(task.get("overlays"))),
        "",
        _bullets(list(target_files(targets))),
    ]
    if target_options(targets):
        lines += ["", "The task's target list also holds these pytest settings, which are not files; the evaluator",
                  "command below passes them to pytest:", "", _bullets(list(target_options(targets)))]
    return "\n".join(lines)


def _restored_from(overlaid: bool) -> list[str]:
    """Where the harness takes the test files it restores: the canonical state, which is the base revision with the
    task's overlay patches applied (harness/incontainer/prepare.py, step 1), so a test an overlay adds or rewrites
    comes back as the overlay left it."""
    if not overlaid:
        return ["configuration: before grading, the harness restores these test files and folders from the base",
                "revision and removes new `conftest.py`, pytest configuration, `sitecustomize` and `.pth` files."]
    return ["configuration: before grading, the harness restores these test files and folders as they are at the",
            "base revision with the task's overlay patches applied (a test file an overlay adds or rewrites comes",
            "back as the overlay left it, even where the base revision has no such file) and removes new",
            "`conftest.py`, pytest configuration, `sitecustomize` and `.pth` files."]


def _evaluator_section(task: dict[str, Any]) -> str:
    command = shlex.join(task.get("evaluator_command") or [])
    return "\n".join([
        "## How your work is evaluated",
        "",
        "From the repository root inside the task's container, the evaluator runs",
        "",
        f"    {command}",
        "",
        f"with a {FINAL_TIMEOUT_SECONDS}-second limit and a structured pytest report. The task succeeds when the run",
        "exits cleanly and every collected test passes; the pass rate counts passed tests against the full expected",
        "total, so a run that fails to collect scores zero. Dependency probes (single pytest node ids) are also run on",
        "the final state to see which cross-component contracts hold.",
    ])
