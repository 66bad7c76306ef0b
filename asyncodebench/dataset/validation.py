"""Check rows against the JSON schemas in `schemas/` and against each other.

Works on any rows, whether just derived from the sources or read back from published Parquet, so the same checks
guard the build and a user's download.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from asyncodebench.dataset.problems import Problem, SourceError
from asyncodebench.dataset.protocols import MULTI_AGENT_PROTOCOLS, PROTOCOLS
from asyncodebench.dataset.sources import Rows
from asyncodebench.dataset.targets import target_files

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"
ROW_SCHEMAS = {"tasks": "task", "scenarios": "scenario", "dependencies": "dependency"}
ID_FIELDS = {"tasks": "task_id", "scenarios": "scenario_id", "dependencies": "dependency_id"}
# Row fields computed from other fields: when their source is invalid, only the source's problem is reported.
DERIVED_FROM = {"container_pinned_ref": {"container_image", "container_digest"}}


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema `schemas/<name>.schema.json`."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


def validator(name: str) -> jsonschema.protocols.Validator:
    """A validator for `schemas/<name>.schema.json`, of the draft the schema declares, with format checks on."""
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def validate_rows(
    rows: Rows, expected_counts: dict[str, int] | None = None, counts_source: str = "data/release.yaml"
) -> None:
    """Raise `SourceError` listing every problem; return quietly when the rows are sound.

    `counts_source` names the file that declared `expected_counts`, so a count mismatch points at the file to edit.
    """
    problems = _schema_problems(rows)
    problems += _id_problems(rows)
    if expected_counts:
        for config, rows_of in rows.by_config().items():
            if len(rows_of) != expected_counts.get(config):
                problems.append(Problem(
                    counts_source, "-", f"expected_counts.{config}",
                    f"declares {expected_counts.get(config)} rows, the sources give {len(rows_of)}"))
    problems += _cross_reference_problems(rows)
    if problems:
        raise SourceError(problems)


def _schema_problems(rows: Rows) -> list[Problem]:
    problems = []
    for config, rows_of in rows.by_config().items():
        check = validator(ROW_SCHEMAS[config])
        id_field = ID_FIELDS[config]
        for row in rows_of:
            row_id = str(row.get(id_field))
            errors = sorted(check.iter_errors(row), key=lambda e: [str(p) for p in e.absolute_path])
            bad_fields = {str(e.absolute_path[0]) for e in errors if e.absolute_path}
            for error in errors:
                where = ".".join(str(p) for p in error.absolute_path) or "(row)"
                if DERIVED_FROM.get(where, set()) & bad_fields:
                    continue  # an echo of the source field's own problem, reported there
                problems.append(Problem(rows.origin.get(row_id, config), row_id, where, error.message))
    return problems


def _id_problems(rows: Rows) -> list[Problem]:
    problems = []
    for config, rows_of in rows.by_config().items():
        counts = Counter(row.get(ID_FIELDS[config]) for row in rows_of)
        problems += [
            Problem(rows.origin.get(str(i), config), str(i), ID_FIELDS[config], f"duplicate id ({n} rows)")
            for i, n in counts.items() if n > 1
        ]
    return problems


def _cross_reference_problems(rows: Rows) -> list[Problem]:
    tasks = {t["task_id"]: t for t in rows.tasks}
    deps_of: dict[str, list[str]] = {}
    problems = []
    for dep in rows.dependencies:
        deps_of.setdefault(dep["task_id"], []).append(dep["dependency_id"])
        problems += _dependency_problems(dep, tasks.get(dep["task_id"]),
                                         rows.origin.get(dep["dependency_id"], "dependencies"))
    for task_id, task in tasks.items():
        origin = rows.origin.get(task_id, "tasks")
        if task["dependency_ids"] != deps_of.get(task_id, []):
            problems.append(Problem(origin, task_id, "dependency_ids", "does not match the task's dependency rows"))
        if task["dependency_count"] != len(deps_of.get(task_id, [])):
            problems.append(Problem(origin, task_id, "dependency_count",
                                    f"{task['dependency_count']} but {len(deps_of.get(task_id, []))} dependency rows"))
        problems += _ownership_problems(task, origin)
    problems += _scenario_problems(rows, tasks)
    return problems


def _dependency_problems(dep: dict[str, Any], task: dict[str, Any] | None, origin: str) -> list[Problem]:
    dep_id = dep["dependency_id"]
    if task is None:
        return [Problem(origin, dep_id, "task_id", f"names unknown task {dep['task_id']}")]
    problems = []
    for group in ("upstream_probe_tests", "downstream_probe_tests", "integrated_probe_tests"):
        for node in dep.get(group) or []:
            if not in_test_targets(node.split("::", 1)[0], task["test_targets"]):
                problems.append(Problem(origin, dep_id, group, f"probe {node} is not in the task's test targets"))
    owned = {a["agent_id"]: a["writable_paths"] for a in task["specialists"]}
    for side in ("producer", "consumer"):
        agent, files = dep.get(f"{side}_agent"), dep.get(f"{side}_files") or []
        if agent == "integrator":
            if files:
                problems.append(Problem(origin, dep_id, f"{side}_files",
                                        "the integrator owns no files; leave it empty"))
        elif agent not in owned:
            problems.append(Problem(origin, dep_id, f"{side}_agent",
                                    f"{agent!r} is not a specialist of {task['task_id']}"))
        elif not set(files) <= set(owned[agent]):
            problems.append(Problem(origin, dep_id, f"{side}_files", f"not all owned by {agent}"))
    return problems


def in_test_targets(path: str, targets: list[str]) -> bool:
    """Whether a test file lies in one of the targets (a target is a file or a folder)."""
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in target_files(targets))


def _ownership_problems(task: dict[str, Any], origin: str) -> list[Problem]:
    """Specialist ids must be unique. Overlaps between specialists' paths and paths outside the single agent's set
    are upstream facts (marshmallow shares schema.py; imapclient's client owns testable_imapclient.py), so they are
    kept, not refused."""
    counts = Counter(a["agent_id"] for a in task["specialists"])
    return [Problem(origin, task["task_id"], "specialists", f"agent id {a} appears {n} times")
            for a, n in counts.items() if n > 1]


def _scenario_problems(rows: Rows, tasks: dict[str, dict[str, Any]]) -> list[Problem]:
    problems = []
    for scenario in rows.scenarios:
        task = tasks.get(scenario["task_id"])
        origin = rows.origin.get(scenario["scenario_id"], "scenarios")
        if task is None:
            problems.append(Problem(origin, scenario["scenario_id"], "task_id", "names an unknown task"))
            continue
        if scenario["protocol"] in MULTI_AGENT_PROTOCOLS and scenario["assignments"] != task["specialists"]:
            problems.append(Problem(origin, scenario["scenario_id"], "assignments",
                                    "do not match the task's specialists"))
        if scenario["protocol"] == "single" and (
            scenario["assignments"][0]["writable_paths"] != task["single_agent_writable_paths"]
        ):
            problems.append(Problem(origin, scenario["scenario_id"], "assignments",
                                    "single agent paths differ from the task's"))
    per_task = Counter(s["task_id"] for s in rows.scenarios)
    problems += [
        Problem(rows.origin.get(t, "scenarios"), t, "scenarios",
                f"{per_task.get(t, 0)} scenarios, expected {len(PROTOCOLS)}")
        for t in tasks if per_task.get(t, 0) != len(PROTOCOLS)
    ]
    return problems
