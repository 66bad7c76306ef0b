"""Probe attribution: which agent's files a dependency point's probe tests actually execute.

A probe is meant to tell whether the producer delivered its side of a contract. The probe lists are upstream facts
and stay as they are; what they measure is measured here: each group of a point's probes (upstream, downstream,
integrated) runs at the reference state under a line tracer (`harness/incontainer/trace_probes.py`, in a prepared
container of the task's image, as the sandbox user), and the executed lines of the specialists' writable files are
credited to the agents owning them. A point whose upstream probes execute none of the producer's files, or more
lines of other agents' files than of the producer's, is flagged: its DRS and CAIL say as much about another agent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from asyncodebench.harness.evaluation import Workbench, probe_args
from asyncodebench.harness.sandbox import IO_DIR, OVERSIZED, SANDBOX_GID, SANDBOX_UID
from asyncodebench.harness.workspace import HOME_DIR, OUT_DIR, SCRIPTS_DIR

GROUPS = ("upstream", "downstream", "integrated")
RECORD_FILE = Path(__file__).resolve().parents[2] / "data" / "probe_attribution.json"
TRACE_SECONDS = 600
RESULT_CAP_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Owner:
    """An agent and the writable paths (files or folders) it owns."""

    agent_id: str
    paths: tuple[str, ...]

    def owns(self, path: str) -> bool:
        """Whether `path` (relative to the tree) is one of the agent's files or inside one of its folders."""
        return any(path == p.rstrip("/") or path.startswith(p.rstrip("/") + "/") for p in self.paths)


def owners(task: dict[str, Any]) -> tuple[Owner, ...]:
    """The task's specialists with their writable paths, from its `tasks` row."""
    return tuple(Owner(a["agent_id"], tuple(a["writable_paths"])) for a in task["specialists"])


def trace_group(bench: Workbench, patch: bytes, nodes: tuple[str, ...], watched: tuple[str, ...]
                ) -> dict[str, list[int]] | None:
    """{file: executed lines} of the watched paths while `nodes` ran at the state `patch` makes (None: not run)."""
    with bench.prepared(patch) as (box, preparation):
        if not preparation.usable:
            return None
        config = {"sandbox_uid": SANDBOX_UID, "sandbox_gid": SANDBOX_GID, "home": HOME_DIR,
                  "workdir": bench.spec.workdir, "pythonpath": box.image_env.get("PYTHONPATH", ""),
                  "watched": list(watched)}
        box.write_files({"trace_probes.py": (SCRIPTS_DIR / "trace_probes.py").read_bytes(),
                         "trace.json": json.dumps(config).encode()}, IO_DIR, mode=0o644)
        result = f"{OUT_DIR}/trace-result.json"
        # Plain pytest, as the probes run (METRICS 0.1), without the JSON report.
        args = [a for a in probe_args(nodes) if "{report}" not in a and a != "--json-report"]
        box.exec([bench.spec.interpreter, "-I", f"{IO_DIR}/trace_probes.py", f"{IO_DIR}/trace.json", result,
                  "-p", "no:cacheprovider", *args], TRACE_SECONDS)
        raw = box.read_file(result, RESULT_CAP_BYTES)
    if raw is None or raw is OVERSIZED:
        return None
    lines: dict[str, list[int]] = json.loads(raw)["lines"]
    return lines


def credit(lines: dict[str, list[int]], agents: tuple[Owner, ...]) -> dict[str, int]:
    """Executed lines per agent (a file owned by several agents counts for each)."""
    totals = {a.agent_id: 0 for a in agents}
    for path, executed in lines.items():
        for agent in agents:
            if agent.owns(path):
                totals[agent.agent_id] += len(executed)
    return totals


def verdict(producer: str, producer_files: list[str], lines: dict[str, list[int]], agents: tuple[Owner, ...]) -> str:
    """`measures_producer`, `executes_no_producer_file` or `mostly_<agent>` for one group's trace;
    `producer_owns_no_files` when the producer is the integrator (its side is the merge, not a file)."""
    if not producer_files:
        return "producer_owns_no_files"
    if not any(f in lines for f in producer_files):
        return "executes_no_producer_file"
    by_agent = credit(lines, agents)
    others = {a: n for a, n in by_agent.items() if a != producer}
    top = max(others.items(), key=lambda kv: kv[1], default=(None, 0))
    if top[0] is not None and top[1] > by_agent.get(producer, 0):
        return f"mostly_{top[0]}"
    return "measures_producer"


def attribute_point(dependency: dict[str, Any], traces: dict[str, dict[str, list[int]] | None],
                    agents: tuple[Owner, ...]) -> dict[str, Any]:
    """One point's record: per group the executed lines by agent and file, and the upstream group's verdict."""
    producer = dependency["producer_agent"]
    groups: dict[str, dict[str, Any]] = {}
    for group, lines in traces.items():
        if lines is None:
            groups[group] = {"traced": False}
            continue
        groups[group] = {"traced": True, "lines_by_agent": credit(lines, agents),
                         "files": {f: len(v) for f, v in sorted(lines.items())},
                         "verdict": verdict(producer, dependency["producer_files"], lines, agents)}
    upstream = groups.get("upstream", {})
    return {"task_id": dependency["task_id"], "producer_agent": producer,
            "producer_files": list(dependency["producer_files"]), "groups": groups,
            "verdict": upstream.get("verdict", "not_traced")}


def attribute_task(bench: Workbench, task: dict[str, Any], dependencies: list[dict[str, Any]], patch: bytes,
                   progress: Callable[[str], None] = lambda _: None) -> dict[str, dict[str, Any]]:
    """Every point of the task, each group of probes traced in a fresh container at the state `patch` makes."""
    agents = owners(task)
    watched = tuple(dict.fromkeys(p for a in agents for p in a.paths))
    records = {}
    for dependency in dependencies:
        traces: dict[str, dict[str, list[int]] | None] = {}
        for group in GROUPS:
            nodes = tuple(dependency[f"{group}_probe_tests"] or ())
            if nodes:
                progress(f"{dependency['dependency_id']}: {group} probes ({len(nodes)})")
                traces[group] = trace_group(bench, patch, nodes, watched)
        records[dependency["dependency_id"]] = attribute_point(dependency, traces, agents)
    return records


def load_record_file(path: Path = RECORD_FILE) -> dict[str, Any]:
    """The recorded attribution, by dependency id."""
    return json.loads(path.read_text())["points"] if path.exists() else {}


def save_record_file(points: dict[str, Any], path: Path = RECORD_FILE) -> None:
    """Write the recorded attribution, sorted by dependency id."""
    path.write_text(json.dumps({"schema_version": "1", "points": dict(sorted(points.items()))}, indent=2) + "\n")


def flagged(points: dict[str, Any]) -> dict[str, str]:
    """Points whose upstream probes do not measure their producer: dependency id -> verdict."""
    return {d: p["verdict"] for d, p in points.items()
            if p["verdict"] not in ("measures_producer", "producer_owns_no_files", "not_traced")}


def markdown_table(points: dict[str, Any], dependencies: list[dict[str, Any]] | None = None) -> str:
    """Per point: task, producer, upstream probes' executed lines (producer / other agents), verdict. Points of
    `dependencies` (rows) missing from `points` are listed as not traced."""
    lines = ["| task | dependency point | producer | upstream probes: producer lines / other agents' lines | verdict |",
             "|---|---|---|---|---|"]
    missing = {d["dependency_id"]: {"task_id": d["task_id"], "producer_agent": d["producer_agent"], "groups": {},
                                    "verdict": "not_traced", "reason": "no image of the task here"}
               for d in dependencies or () if d["dependency_id"] not in points}
    for dep_id, p in sorted({**points, **missing}.items(), key=lambda kv: (kv[1]["task_id"], kv[0])):
        up = p["groups"].get("upstream", {})
        if not up.get("traced"):
            cell = p.get("reason", "not traced")
        else:
            mine = up["lines_by_agent"].get(p["producer_agent"], 0)
            other = {a: n for a, n in up["lines_by_agent"].items() if a != p["producer_agent"] and n}
            cell = f"{mine} / " + (", ".join(f"{a} {n}" for a, n in sorted(other.items())) or "0")
        task = p["task_id"].split(":", 1)[1]
        lines.append(f"| {task} | `{dep_id}` | {p['producer_agent']} | {cell} | {p['verdict'].replace('_', ' ')} |")
    return "\n".join(lines) + "\n"


def note(point: dict[str, Any]) -> str:
    """The sentence a flagged point's `audit_note` carries."""
    up = point["groups"]["upstream"]["lines_by_agent"]
    producer = point["producer_agent"]
    ranked = sorted(up.items(), key=lambda kv: -kv[1])
    others = ", ".join(f"{n} of {a}'s files" for a, n in ranked if a != producer and n)
    return (f"Probe attribution (scripts/attribute_probes.py, reference state): the upstream probes execute "
            f"{up.get(producer, 0)} lines of the producer's files and {others}, so this point's DRS and CAIL "
            f"also reflect the other agents' code.")
