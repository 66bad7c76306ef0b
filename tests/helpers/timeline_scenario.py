"""A synthetic evaluated scenario for the timeline page, written as a run would leave it (no Docker): three
specialists and a manager, a merge conflict, a scope violation, a resolved point and an unresolved one, and a
SAD-proxy candidate.

    <root>/agents/predictions.jsonl                   the line, with its runner record (events, agents, merges)
    <root>/agents/scenarios/s/trajectories/*.jsonl    the agents' and the manager's trajectories
    <root>/eval/report.json                            the evaluation's report (its predictions file, the row)
    <root>/eval/predictions/<slug>/result.json, dependency_probe_checkpoints.jsonl

The result's `run_metrics` are computed by `scoring.dependency.run_metrics` from the same passes the checkpoint
records hold, so a test can hold the page to the kit's own DRS and CAIL numbers.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from asyncodebench.reports.htmlreport import prediction_folder
from asyncodebench.scoring.dependency import CheckpointRecord, DependencyOutcome, DependencyPoint, run_metrics

START = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.timezone.utc)
AGENTS = ("core_agent", "api_agent", "cli_agent")
TASK, PROTOCOL, MODEL = "asyncodebench-demo:minicache", "async_manager", "synthetic-model"
# (dependency id, producer, consumer)
POINTS = (("minicache.core_to_api.call_key_contract", "core_agent", "api_agent"),
          ("minicache.core_to_cli.clear_contract", "core_agent", "cli_agent"),
          ("minicache.api_to_cli.memoize_contract", "api_agent", "cli_agent"))
# per checkpoint: (type, agent, workspace, seconds, {dependency: (upstream, downstream, integrated)})
CHECKPOINTS = (
    ("agent_artifact", "core_agent", "agent_workspace", 30, {0: (1, 0, 0), 1: (1, 0, 0), 2: (0, 0, 0)}),
    ("integration_after_merge", "core_agent", "integrated_workspace", 32, {0: (1, 0, 0), 1: (1, 0, 0), 2: (0, 0, 0)}),
    ("agent_artifact", "api_agent", "agent_workspace", 50, {0: (1, 1, 1), 1: (1, 0, 0), 2: (1, 0, 0)}),
    ("integration_after_merge", "api_agent", "integrated_workspace", 52, {0: (1, 1, 1), 1: (1, 0, 0), 2: (1, 0, 0)}),
    ("agent_artifact", "cli_agent", "agent_workspace", 70, {0: (1, 1, 1), 1: (1, 1, 0), 2: (1, 1, 1)}),
    ("integration_after_merge", "cli_agent", "integrated_workspace", 72, {0: (1, 1, 1), 1: (1, 0, 0), 2: (1, 0, 0)}),
    ("final_integrated", None, "integrated_workspace", 73, {0: (1, 1, 1), 1: (1, 0, 0), 2: (1, 0, 0)}),
)
# merges as the runner records them: cli_agent's conflicts (the integrated state keeps the earlier work)
MERGES = (("core_agent", "clean", None, ["minicache/core.py"], []),
          ("api_agent", "clean", None, ["minicache/api.py", "README.md"], ["README.md"]),
          ("cli_agent", "conflict", "merge_conflict", ["minicache/cli.py", "minicache/api.py"], []))


def at(seconds: float) -> str:
    return (START + dt.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


@dataclass
class Scenario:
    root: Path
    run_dir: Path  # the evaluation's run folder
    agents_run: Path
    folder: Path  # the prediction's folder
    result: dict[str, Any]
    line: dict[str, Any]

    @property
    def page(self) -> Path:
        return self.folder / "timeline.html"


def _trajectory(agent: str, responses: int, first: float, last: float, output: str, text: str,
                sad_at: int | None) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"type": "message", "role": "system", "content": f"You are {agent}. {text}", "time": at(first)},
        {"type": "message", "role": "user", "content": f"Task for {agent}: {text}", "time": at(first)}]
    step = (last - first) / max(responses, 1)
    for k in range(responses):
        when = first + step * (k + 0.5)
        command = f"echo step {k} of {agent} {text}"
        if sad_at == k:
            command = "cat >> minicache/cli.py <<'EOF'\ndef call_key(args, kwargs):\n    return args\nEOF"
        lines.append({"type": "response", "content": f"thinking {k} {text}", "commands": [command],
                      "prompt_tokens": 100 + k, "completion_tokens": 10, "time": at(when)})
        lines.append({"type": "observation", "command": command, "output": output or f"out {k}",
                      "exit_code": 0 if k % 7 else 1, "seconds": 0.1, "timed_out": False,
                      "time": at(when + step / 4)})
        if agent == "api_agent" and k == 1:
            lines.append({"type": "inbox", "content": f"manager: wait for the core {text}",
                          "time": at(when + step / 3)})
    lines.append({"type": "exit", "exit_status": "Submitted", "content": "", "time": at(last)})
    lines.append({"type": "summary", "termination_reason": "agent_finish", "usage": {}, "time": at(last)})
    return [{"index": i, **line} for i, line in enumerate(lines)]


def write_scenario(root: Path, responses: int = 6, output: str = "", text: str = "",
                   agent_names: tuple[str, ...] = AGENTS) -> Scenario:
    """Write the scenario under `root`; `responses` per agent, each command's `output` and a `text` put into every
    prompt, response and message (a test's hostile strings), and the agents' ids (`agent_names`, for hostile
    ones; the first three play core, api and cli)."""
    names = dict(zip(AGENTS, agent_names))
    agents_run, run_dir = root / "agents", root / "eval"
    trajectories_dir = agents_run / "scenarios" / "s" / "trajectories"
    trajectories_dir.mkdir(parents=True)
    spans = {"core_agent": (2, 29), "api_agent": (3, 49), "cli_agent": (4, 69)}
    paths = []
    for agent, (first, last) in spans.items():
        name = names[agent]
        lines = _trajectory(name, responses, first, last, output, text, responses // 2 if agent == "cli_agent"
                            else None)
        file = trajectories_dir / f"{name}.jsonl"
        file.write_text("".join(json.dumps(line) + "\n" for line in lines))
        paths.append(str(file.relative_to(agents_run)))
    manager = [{"index": 0, "type": "message", "role": "user", "content": f"brief the team {text}", "time": at(1)},
               {"index": 1, "type": "response", "content": '{"actions": []}' + text, "prompt_tokens": 5,
                "completion_tokens": 3, "time": at(1.5)},
               {"index": 2, "type": "response", "content": "hand off core", "time": at(33)},
               {"index": 3, "type": "response", "content": "rerun cli", "time": at(53)}]
    (trajectories_dir / "manager.jsonl").write_text("".join(json.dumps(line) + "\n" for line in manager))
    paths.append(str((trajectories_dir / "manager.jsonl").relative_to(agents_run)))
    events: list[dict[str, Any]] = [
        {"event": "manager_started", "time": at(0.5)},
        {"event": "message_sent", "agent_id": names["api_agent"], "source": "manager", "posted": True,
         "time": at(1.6)},
        {"event": "artifact_handed_off", "agent_id": names["api_agent"], "source": names["core_agent"],
         "posted": True, "time": at(33)},
        {"event": "rerun_requested", "agent_id": names["cli_agent"], "moment": "online", "time": at(53)},
        {"event": "message_undelivered", "agent_id": names["core_agent"], "text": "late", "time": at(54)}]
    for kind, agent, _, seconds, _ in CHECKPOINTS:
        merge = next((m for m in MERGES if m[0] == agent), None)
        if merge is None:
            events.append({"event": "final_integrated", "time": at(seconds)})
        elif kind == "agent_artifact":
            events.append({"event": "agent_artifact", "agent_id": names[merge[0]], "changed_paths": merge[3],
                           "time": at(seconds)})
        else:
            events.append({"event": "integration_after_merge", "agent_id": names[merge[0]],
                           "merge_status": merge[1], "reason": merge[2], "out_of_scope": merge[4],
                           "time": at(seconds)})
    line = {"task_id": TASK, "protocol": PROTOCOL, "model_name_or_path": MODEL, "model_patch": "",
            "trajectories": paths,
            "runner": {"scenario_id": f"{TASK}/{PROTOCOL}", "valid": True,
                       "agents": [{"agent_id": names[a], "trajectory": p} for a, p in zip(AGENTS, paths)],
                       "events": events}}
    predictions = agents_run / "predictions.jsonl"
    predictions.write_text(json.dumps(line) + "\n")

    points = [DependencyPoint(dep, names[p], names[c], (), (), ("u",), ("d",), ("i",), "", ("ADPR", "DRS", "CAIL"))
              for dep, p, c in POINTS]
    records, checkpoints = [], []
    for step, (kind, agent, workspace, seconds, passes) in enumerate(CHECKPOINTS, start=1):
        outcomes = tuple(DependencyOutcome(POINTS[k][0], *map(bool, passes[k])) for k in range(len(POINTS)))
        checkpoints.append(CheckpointRecord(step, kind, kind if kind == "final_integrated" else f"{kind}:{step}",
                                            workspace, at(100), outcomes))
        records.append({
            "schema_version": "0.1", "checkpoint_id": checkpoints[-1].checkpoint_id, "checkpoint_type": kind,
            "logical_step": step, "recorded_at": at(100), "workspace_kind": workspace,
            "agent_id": names[agent] if agent else None, "probe_test_results": {},
            "dependency_results": [{"dependency_id": dep, "producer_agent": names[p], "consumer_agent": names[c],
                                    "groups": {g: {"passed": bool(passes[k][j])}
                                               for j, g in enumerate(("upstream", "downstream", "integrated"))}}
                                   for k, (dep, p, c) in enumerate(POINTS)]})
    metrics = run_metrics(checkpoints, points)
    row = {"line": 1, "task_id": TASK, "protocol": PROTOCOL, "model_name_or_path": MODEL,
           "prediction_run_id": None, "merge_conflicts": 1, "scope_violations": 0, "integration_source": "runner",
           "out_of_scope_paths": ["README.md"], "trust_status": "verified",
           # a flag whose label is one long word (paths without spaces) must wrap on a phone
           "dropped_by_runner": ["minicache/" + "very_long_directory_name_" * 6 + f"{k}.py" for k in range(4)]}
    folder = run_dir / prediction_folder(row)
    folder.mkdir(parents=True)
    result = {
        "schema_version": "1.0", "status": "evaluated", "task_id": TASK, "protocol": PROTOCOL,
        "model_name_or_path": MODEL, "prediction_run_id": None, "line": 1, "final_success": False,
        "pass_rate": 0.8, "tests_passed": 20, "tests_denominator": 25, "outcome": "model_failure:tests_failed",
        "trust": {"status": "verified", "reasons": []},
        "run_metrics": {**{k: v for k, v in asdict(metrics).items() if k != "dependencies"},
                        "dependencies": [asdict(d) for d in metrics.dependencies]},
        "integration": {"protocol": PROTOCOL, "agents": 3, "merge_conflicts": 1, "scope_violations": 0,
                        "merges": [{"agent_id": names[a], "merge_status": status, "strategy": "git-apply",
                                    "reason": reason, "out_of_scope": out} for a, status, reason, _, out in MERGES],
                        "source": "runner"},
        "sad_proxy": {"label": "proxy", "dependencies_enabled": [POINTS[0][0]], "candidate_count": 1,
                      "candidates": [["minicache/cli.py", "callkey"]]},
    }
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "dependency_probe_checkpoints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run_dir / "report.json").write_text(json.dumps({"run": {"predictions_file": {"path": str(predictions)}},
                                                     "predictions": [row]}))
    return Scenario(root, run_dir, agents_run, folder, result, line)
