"""The agents' run folder and the predictions it writes.

    <output dir>/<run id>/
        run.lock                  the OS lock of the process running it (`run.runfolder.RunLock`)
        settings.json             what decides the agents' work: dataset, agent, model, budget, limits
        predictions.jsonl         one prediction per finished scenario, for `evaluate.py` as it is
        scenarios/<slug>/         one folder per scenario:
            prediction.json       its prediction, written last (atomically): the scenario is done
            invalid.json          instead, when an agent or the manager ended with an invalid termination
                                  (METRICS section 9): the line marked `runner.valid: false`; not finished
            trajectories/<agent>.jsonl, patches/<agent>.diff
        invalid-attempts/<slug>/<n>/  an invalid attempt's folder, set aside when a rerun redoes the scenario

A prediction is `schemas/prediction.schema.json`'s: `model_patch` (the final integrated state), `agent_patches`
for the specialists' protocols (the harness integrates them and derives the checkpoints), `usage` (tokens,
responses, wall time), and `runner`, a field the schema keeps and ignores: the runner's own record of the
scenario (agent and model, budget, each agent's run, the timed events, the scenario folder, whether it is valid).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import asyncodebench
from asyncodebench.agents.adapter import INVALID_TERMINATIONS, AgentAdapter, ModelEndpoint, Usage
from asyncodebench.agents.team import Outcome, Scenario, budget
from asyncodebench.files import write_atomic
from asyncodebench.run import store
from asyncodebench.scoring.provenance import chain

SCENARIOS, PREDICTIONS, RECORD, SETTINGS = "scenarios", "predictions.jsonl", "prediction.json", "settings.json"
INVALID, INVALID_ATTEMPTS = "invalid.json", "invalid-attempts"
DETAIL_CHARS = 500  # of an invalid run's detail kept in the line's reasons
RUNNER_RECORD_VERSION = "1.0"
SETTINGS_VERSION = 1


class SettingsChangedError(ValueError):
    """The run folder's scenarios were run with other settings than the ones given now."""


def scenario_folder(run_dir: Path, scenario_id: str) -> Path:
    """`scenarios/<readable id>__<8 hex>`: unique to the scenario id, safe on any filesystem."""
    digest = hashlib.sha256(scenario_id.encode()).hexdigest()[:8]
    return run_dir / SCENARIOS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', scenario_id)[:120]}__{digest}"


def prediction(scenario: Scenario, outcome: Outcome, seconds: float, name: str, adapter: AgentAdapter,
               endpoint: ModelEndpoint, budget_override: int | None, run_dir: Path) -> dict[str, Any]:
    """The scenario's prediction line."""
    folder = scenario_folder(run_dir, scenario.row["scenario_id"])
    usage = sum((a.run.usage for a in outcome.agents), Usage())
    line: dict[str, Any] = {
        "task_id": scenario.row["task_id"], "protocol": scenario.protocol, "model_name_or_path": name,
        "model_patch": outcome.model_patch,
    }
    if outcome.agent_patches is not None:
        line["agent_patches"] = outcome.agent_patches
    if outcome.checkpoints is not None:
        line["checkpoints"] = outcome.checkpoints
    line["usage"] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                     "total_tokens": usage.total_tokens, "model_calls": usage.responses, "runtime_seconds": seconds,
                     "agent_seconds": usage.seconds}
    costs = [a.run.cost_usd for a in outcome.agents if a.run.cost_usd is not None]
    if costs:  # priced (--prices): what the scenario's responses cost
        line["usage"]["cost_usd"] = round(sum(costs), 6)
    # the report links each agent's trajectory: paths relative to predictions.jsonl, which is in the run folder
    line["trajectories"] = [a.run.to_record(run_dir)["trajectory"] for a in outcome.agents]
    invalid = [{"agent_id": a.run.agent_id, "termination_reason": a.run.termination_reason,
                "detail": a.run.detail[-DETAIL_CHARS:]}
               for a in outcome.agents if a.run.termination_reason in INVALID_TERMINATIONS]
    line["runner"] = {
        "version": RUNNER_RECORD_VERSION, "kit_version": asyncodebench.__version__,
        "scenario_id": scenario.row["scenario_id"], "valid": not invalid, "invalid": invalid,
        "agent": {"name": adapter.name, "version": adapter.version}, "model": endpoint.to_record(),
        "budget": {"unit": "model_response", "per_agent_run": budget(scenario, budget_override),
                   "source": "--budget" if budget_override else "scenario row (subagent_max_iterations)"},
        "agents": [{**a.run.to_record(run_dir), "out_of_scope": list(a.out_of_scope),
                    "patch_problem": a.patch_problem, "container": a.container,
                    "dropped": [{"path": d.path, "reason": d.reason} for d in a.dropped],
                    "recoveries": [r.to_record() for r in a.recoveries],
                    "exhausted_commands": a.exhausted_commands} for a in outcome.agents],
        "merges": [{k: v for k, v in asdict(m).items() if k not in ("agent_state", "integrated_state")}
                   for m in outcome.merges],
        "events": outcome.events, "folder": str(folder.relative_to(run_dir)),
    }
    if outcome.checkpoints is not None:  # its own timeline: chained to the trajectories (scoring.provenance)
        line["runner"]["timeline"] = chain(outcome.checkpoints, _trajectory_files(outcome, run_dir))
    return line


def _trajectory_files(outcome: Outcome, run_dir: Path) -> dict[str | None, list[tuple[str, bytes]]]:
    """Each agent's trajectory files (every run of it), by the paths the line lists, with their bytes."""
    files: dict[str | None, list[tuple[str, bytes]]] = {}
    for agent in outcome.agents:
        path = agent.run.to_record(run_dir)["trajectory"]
        if path and (run_dir / path).is_file():
            files.setdefault(agent.run.agent_id, []).append((path, (run_dir / path).read_bytes()))
    return files


def write_prediction(run_dir: Path, line: dict[str, Any]) -> None:
    """Keep a finished scenario's prediction in its folder (written last: the scenario is then done); a line marked
    invalid is kept as `invalid.json` instead: the scenario is not finished, and a rerun redoes it."""
    folder = scenario_folder(run_dir, line["runner"]["scenario_id"])
    if line["runner"].get("valid", True):
        store.write_json(folder / RECORD, line)
    else:
        store.write_json(folder / INVALID, line)


def invalid_line(run_dir: Path, scenario_id: str) -> dict[str, Any] | None:
    """The line of a scenario whose last attempt was invalid (and that has not finished since), or None."""
    if finished(run_dir, scenario_id) is not None:
        return None
    path = scenario_folder(run_dir, scenario_id) / INVALID
    return store.read_json(path) if path.is_file() else None


def set_aside_invalid(run_dir: Path, scenario_id: str) -> Path | None:
    """Move the folder of an invalid attempt to `invalid-attempts/<slug>/<n>` before the scenario is redone, so
    nothing of it is lost or mixed with the new attempt; the new place, or None when there was none."""
    folder = scenario_folder(run_dir, scenario_id)
    if not (folder / INVALID).is_file() or (folder / RECORD).is_file():
        return None
    attempts = run_dir / INVALID_ATTEMPTS / folder.name
    attempts.mkdir(parents=True, exist_ok=True)
    target = attempts / str(sum(1 for _ in attempts.iterdir()) + 1)
    folder.rename(target)
    return target


def invalid_reasons(line: dict[str, Any]) -> str:
    """Why a line is invalid, in one phrase: each agent and its termination."""
    return "; ".join(f"{r['agent_id']}: {r['termination_reason']} ({r['detail'][:200]})"
                     for r in line["runner"].get("invalid") or [])


def finished(run_dir: Path, scenario_id: str) -> dict[str, Any] | None:
    """The prediction of a finished scenario, or None when it has not finished."""
    path = scenario_folder(run_dir, scenario_id) / RECORD
    return store.read_json(path) if path.is_file() else None


def write_predictions(run_dir: Path, lines: list[dict[str, Any]]) -> Path:
    """`predictions.jsonl`: the given predictions, one JSON line each (atomically)."""
    path = run_dir / PREDICTIONS
    write_atomic(path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


def check_settings(run_dir: Path, current: dict[str, Any]) -> None:
    """Record `current` as the run folder's settings on its first start; later, refuse other settings.

    Raises:
        SettingsChangedError: naming each setting that differs.
    """
    path = run_dir / SETTINGS
    if not path.is_file():
        store.write_json(path, {"version": SETTINGS_VERSION, **current})
        return
    recorded = store.read_json(path)
    differ = [f"{key}: was {recorded.get(key)!r}, now {value!r}" for key, value in current.items()
              if recorded.get(key) != value]
    if differ:
        raise SettingsChangedError(
            f"the run folder {run_dir} was started with other settings ({'; '.join(differ)}); rerun with the same "
            "ones to resume, or choose another --run-id or --output-dir")
