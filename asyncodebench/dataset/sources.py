"""Read the human-edited sources in `data/` and derive the three row sets from them.

Every fact lives once in the sources: a task file (`data/tasks/<name>.yaml`) with its prose beside it
(`<name>.md`), the protocol table (`data/protocols.yaml`) and the release file (`data/release.yaml`). Scenario rows,
dependency counts, pinned references and the full problem statement are derived here, never typed.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from asyncodebench.dataset.problems import Problem, SourceError
from asyncodebench.dataset.statement import compose_statement

TASK_FIELDS = {
    "task_id", "source_task_id", "repo", "repository_url", "base_revision", "pull_request_url", "overlays",
    "container_image", "container_digest", "container_runtime_root", "evaluator_command", "test_targets",
    "environment_requirements", "expected_test_counts", "license", "license_file", "domain", "languages",
    "parallelizability", "specialists", "single_agent_writable_paths", "upstream_scenario_ids",
    "communication_conditions", "dependencies",
}
OPTIONAL_TASK_FIELDS = {"pull_request_url", "container_runtime_root"}
DEPENDENCY_FIELDS = {
    "dependency_id", "type_code", "dependency_type", "producer_subproblem", "consumer_subproblem", "producer_agent",
    "consumer_agent", "producer_files", "consumer_files", "contract_summary", "upstream_probe_tests",
    "downstream_probe_tests", "integrated_probe_tests", "metrics_enabled", "audit_note",
}
PROTOCOL_FIELDS = (
    "protocol_id", "display_name", "execution_mode", "concurrent_execution", "online", "communication_condition",
    "assignments", "profile",
)
ASSIGNMENT_FIELDS = ("agent_id", "role", "subproblem_id", "writable_paths", "primary_test_targets")
BUDGET_FIELDS = (
    "profile_id", "profile_file", "unit", "manager_max_iterations", "subagent_max_iterations", "max_rounds_chat",
    "max_subagents", "manager_max_iterations_total", "manager_max_interventions", "manager_max_tokens_total",
    "manager_max_active_seconds_per_event", "manager_max_active_seconds_total",
)


@dataclass
class Rows:
    """The three configurations' rows, plus where each row came from (for error messages)."""

    tasks: list[dict[str, Any]] = field(default_factory=list)
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    dependencies: list[dict[str, Any]] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)  # row id -> source file

    def by_config(self) -> dict[str, list[dict[str, Any]]]:
        """The rows keyed by configuration name."""
        return {"tasks": self.tasks, "scenarios": self.scenarios, "dependencies": self.dependencies}


def merge_rows(parts: list[Rows]) -> Rows:
    """The rows of several task sets in one, in order: e.g. the two demo tasks, each pinned to its own digest.

    Not validated: an id that two parts share is found by `validation.validate_rows` on the result.
    """
    merged = Rows()
    for part in parts:
        merged.tasks += part.tasks
        merged.scenarios += part.scenarios
        merged.dependencies += part.dependencies
        merged.origin.update(part.origin)
    return merged


def read_yaml(path: Path) -> Any:
    """The YAML document in `path`.

    Raises:
        SourceError: the file is missing or is not valid YAML.
    """
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SourceError([Problem(str(path), "-", "-", "file not found")]) from exc
    except yaml.YAMLError as exc:
        raise SourceError([Problem(str(path), "-", "-", f"not valid YAML: {exc}")]) from exc


def load_release(data_dir: Path) -> tuple[dict[str, Any], Rows]:
    """Load the release described by `data_dir/release.yaml`; return its metadata and rows (not yet validated)."""
    release = read_yaml(data_dir / "release.yaml")
    task_files = [data_dir / "tasks" / f"{name}.yaml" for name in release["release_order"]]
    return release, rows_from_task_files(task_files, data_dir / "protocols.yaml")


def rows_from_task_files(task_files: list[Path], protocols_file: Path, digest_override: str | None = None) -> Rows:
    """Derive rows from task source files, in the given order.

    `digest_override` replaces the container digest of every task: used for the demo task, whose image is built on
    the user's machine and so gets its digest there.
    """
    protocol_table = read_yaml(protocols_file)
    rows, problems = Rows(), protocol_table_problems(protocol_table, protocols_file)
    table_is_sound = not problems  # a bad table is reported once, not once per task
    for path in task_files:
        source = read_yaml(path)
        if not isinstance(source, dict):
            problems.append(Problem(str(path), "-", "-", "a task file must hold a mapping of fields"))
            continue
        problems += _check_field_names(path, source)
        if digest_override:
            source = {**source, "container_digest": digest_override}
        try:
            task = task_row(source, path.with_suffix(".md"))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            problems.append(Problem(str(path), str(source.get("task_id", "-")), "-", f"cannot derive the row: {exc!r}"))
            continue
        rows.tasks.append(task)
        rows.origin[task["task_id"]] = str(path)
        for dep in dependency_rows(source):
            rows.dependencies.append(dep)
            rows.origin[dep["dependency_id"]] = str(path)
        for scenario in scenario_rows(source, protocol_table) if table_is_sound else []:
            rows.scenarios.append(scenario)
            rows.origin[scenario["scenario_id"]] = str(path)
    if problems:
        raise SourceError(problems)
    return rows


def _check_field_names(path: Path, source: dict[str, Any]) -> list[Problem]:
    row = str(source.get("task_id", "-"))
    problems = _field_name_problems(path, row, source, TASK_FIELDS, OPTIONAL_TASK_FIELDS)
    for i, dep in enumerate(source.get("dependencies") or []):
        if not isinstance(dep, dict):
            problems.append(Problem(str(path), row, f"dependencies[{i}]", "must be a mapping"))
            continue
        dep_row = str(dep.get("dependency_id", f"dependencies[{i}]"))
        problems += _field_name_problems(path, dep_row, dep, DEPENDENCY_FIELDS, {"audit_note"})
    return problems


def _field_name_problems(
    path: Path, row: str, mapping: dict[str, Any], known: set[str], optional: set[str]
) -> list[Problem]:
    """Unknown and missing fields, one problem each; a misspelt name is one problem, not an unknown plus a missing.

    The close-match pairing exists because a typo otherwise produces two messages for one mistake, and the second
    ("missing field") sends the editor looking for something they did write.
    """
    missing = sorted(known - optional - mapping.keys())
    problems = []
    for key in mapping:
        if key in known:
            continue
        guess = difflib.get_close_matches(str(key), missing, n=1)
        if guess:
            missing.remove(guess[0])
            problems.append(Problem(str(path), row, str(key), f"unknown field; rename it to {guess[0]!r}"))
        else:
            problems.append(Problem(str(path), row, str(key), "unknown field; remove it or fix its name"))
    return problems + [Problem(str(path), row, key, "missing field") for key in missing]


def task_row(source: dict[str, Any], prose_file: Path) -> dict[str, Any]:
    """The `tasks` row of one task source."""
    deps = source.get("dependencies") or []
    image = source.get("container_image") or ""
    digest = source.get("container_digest") or ""
    prose = prose_file.read_text(encoding="utf-8") if prose_file.exists() else ""
    return {
        "task_id": source.get("task_id"),
        "source_task_id": source.get("source_task_id"),
        "repo": source.get("repo"),
        "repository_url": source.get("repository_url"),
        "base_revision": source.get("base_revision"),
        "pull_request_url": source.get("pull_request_url"),
        "overlays": [{"path": o.get("path"), "sha256": o.get("sha256")} for o in source.get("overlays") or []],
        "problem_statement": compose_statement(source, prose) if prose.strip() else "",
        "container_image": image,
        "container_digest": digest,
        "container_pinned_ref": f"{image.rsplit(':', 1)[0]}@{digest}",
        "container_runtime_root": source.get("container_runtime_root"),
        "evaluator_command": source.get("evaluator_command"),
        "test_targets": source.get("test_targets"),
        "dependency_count": len(deps),
        "dependency_ids": [d.get("dependency_id") for d in deps],
        "specialists": [_assignment(s) for s in source.get("specialists") or []],
        "single_agent_writable_paths": source.get("single_agent_writable_paths"),
        "environment_requirements": source.get("environment_requirements") or [],
        "expected_test_counts": source.get("expected_test_counts") or [],
        "license": source.get("license"),
        "license_file": source.get("license_file"),
        "domain": source.get("domain"),
        "languages": source.get("languages"),
        "parallelizability": source.get("parallelizability"),
    }


def _assignment(agent: dict[str, Any]) -> dict[str, Any]:
    return {key: agent.get(key) for key in ASSIGNMENT_FIELDS}


def dependency_rows(source: dict[str, Any]) -> list[dict[str, Any]]:
    """The `dependencies` rows of one task source, in source order."""
    return [
        {"dependency_id": dep.get("dependency_id"), "task_id": source.get("task_id"),
         **{key: dep.get(key) for key in sorted(DEPENDENCY_FIELDS - {"dependency_id"})},
         # The integrator owns no files; the sources say null, the rows keep the list type.
         "producer_files": dep.get("producer_files") or [], "consumer_files": dep.get("consumer_files") or []}
        for dep in source.get("dependencies") or []
    ]


def protocol_table_problems(table: Any, path: Path) -> list[Problem]:
    """Defects of the protocol table, named against `protocols.yaml` itself (row = protocol id)."""
    if not isinstance(table, dict) or not isinstance(table.get("protocols"), list):
        return [Problem(str(path), "-", "protocols", "the table must map `protocols` to a list")]
    ids = [p.get("protocol_id") for p in table["protocols"] if isinstance(p, dict)]
    problems = []
    for i, protocol in enumerate(table["protocols"]):
        if not isinstance(protocol, dict):
            problems.append(Problem(str(path), f"protocols[{i}]", "-", "each protocol must be a mapping of fields"))
            continue
        pid = str(protocol.get("protocol_id", f"protocols[{i}]"))
        missing = [key for key in PROTOCOL_FIELDS if key not in protocol]
        problems += [Problem(str(path), pid, key, "missing field") for key in missing]
        owner = protocol.get("assignments")
        if "assignments" not in missing and owner not in ("single", "specialists") and owner not in ids:
            problems.append(Problem(str(path), pid, "assignments",
                                    f"{owner!r} is neither `single`, `specialists` nor a protocol id of {ids}"))
        if "profile" not in missing and protocol["profile"] not in (table.get("profiles") or {}):
            problems.append(Problem(str(path), pid, "profile", f"unknown profile {protocol['profile']!r}"))
    return problems


def scenario_rows(source: dict[str, Any], table: dict[str, Any]) -> list[dict[str, Any]]:
    """One `scenarios` row per protocol of the (already checked) protocol table, in table order."""
    task_id = source.get("task_id")
    by_id = {p["protocol_id"]: p for p in table["protocols"]}
    rows = []
    for protocol in table["protocols"]:
        pid = protocol["protocol_id"]
        owner = protocol["assignments"]  # single | specialists | another protocol's id
        base = by_id.get(owner, protocol)
        assignments = _assignments_for(source, base["assignments"])
        condition = base["communication_condition"]
        if condition == "per_task":
            condition = (source.get("communication_conditions") or {}).get(base["protocol_id"])
        profile = table["profiles"][protocol["profile"]]
        rows.append({
            "scenario_id": f"{task_id}/{pid}",
            "task_id": task_id,
            "protocol": pid,
            "display_name": protocol["display_name"],
            "execution_mode": protocol["execution_mode"],
            "online": protocol["online"],
            "agent_count": len(assignments),
            "concurrent_execution": protocol["concurrent_execution"],
            "communication_condition": condition,
            "source_scenario_id": (source.get("upstream_scenario_ids") or {}).get(pid),
            "assignments_source_protocol": owner if owner in by_id else None,
            "assignments": assignments,
            "budget": {key: profile.get(key) for key in BUDGET_FIELDS},
        })
    return rows


def _assignments_for(source: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    if kind == "single":
        targets = list(dict.fromkeys(t for s in source.get("specialists") or []
                                     for t in s.get("primary_test_targets") or []))
        return [{
            "agent_id": "single_agent", "role": "single agent owning the whole task", "subproblem_id": None,
            "writable_paths": source.get("single_agent_writable_paths"), "primary_test_targets": targets,
        }]
    return [_assignment(s) for s in source.get("specialists") or []]
