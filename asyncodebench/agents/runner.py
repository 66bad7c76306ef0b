"""Run chosen scenarios into a run folder: each one once (a finished scenario is kept on resume), several at a time
with `max_workers`, and write the predictions file of every finished scenario.

A scenario whose containers fail for an infrastructure reason (the daemon, the image) is reported and left
unfinished, so a rerun of the same command does it again; what agents do is never an infrastructure failure.
"""

from __future__ import annotations

import fnmatch
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from asyncodebench.agents import runfolder
from asyncodebench.agents.adapter import AgentAdapter, ModelEndpoint
from asyncodebench.agents.protocols import IMPLEMENTED, run_scenario
from asyncodebench.agents.team import Context, Scenario
from asyncodebench.dataset.sources import Rows
from asyncodebench.harness.evaluation import Settings, Workbench
from asyncodebench.harness.sandbox import SandboxUnavailableError
from asyncodebench.harness.spec import TaskSpec

SCRIPTED = "scripted"


class NoScenarioError(ValueError):
    """The patterns chose no scenario the runner can run."""


@dataclass(frozen=True)
class RunnerConfig:
    """What every scenario of one run shares. `container_key` labels its containers; `scripted`: each agent asks
    the endpoint as `scripted/<task>/<protocol>/<agent>` (the scripted server's agent names)."""

    run_dir: Path
    container_key: str
    name: str
    adapter: AgentAdapter
    endpoint: ModelEndpoint
    scripted: bool
    budget: int | None
    command_timeout: float
    settings: Settings
    max_workers: int = 1
    executor: str = "local"  # or "ray": each scenario a Ray task (agents.ray_scenarios)
    ray_address: str | None = None


@dataclass
class RunSummary:
    """Every selected scenario's prediction, in selection order (finished ones), and the failed ones with why."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    reused: int = 0


def select(rows: Rows, patterns: list[str]) -> tuple[list[Scenario], list[str]]:
    """The scenarios whose id matches a pattern (`fnmatch`, e.g. `asyncodebench-demo:*`, `*/single`), in the rows'
    order, and the matching ids of protocols not implemented yet (left out).

    Raises:
        NoScenarioError: nothing runnable matched; the message lists what there is.
    """
    tasks = {t["task_id"]: t for t in rows.tasks}
    matched = [s for s in rows.scenarios if any(fnmatch.fnmatchcase(s["scenario_id"], p) for p in patterns)]
    chosen = [Scenario(s, tasks[s["task_id"]], TaskSpec.from_rows(tasks[s["task_id"]], rows.dependencies))
              for s in matched if s["protocol"] in IMPLEMENTED]
    skipped = [s["scenario_id"] for s in matched if s["protocol"] not in IMPLEMENTED]
    if not chosen:
        known = ", ".join(s["scenario_id"] for s in rows.scenarios[:6])
        raise NoScenarioError(
            f"--scenarios {','.join(patterns)} chose no scenario of an implemented protocol ({', '.join(IMPLEMENTED)})"
            + (f"; it matched only {', '.join(skipped)}" if skipped else "")
            + f"; scenario ids look like {known}, ...; patterns such as 'asyncodebench-demo:*' or '*/single' work")
    return chosen, skipped


def endpoint_for(config: RunnerConfig, scenario: Scenario) -> Callable[[str], ModelEndpoint]:
    """Each agent's endpoint: the configured one, or under the scripted server its own agent name."""
    if not config.scripted:
        return lambda agent_id: config.endpoint
    prefix = f"{SCRIPTED}/{scenario.row['task_id']}/{scenario.protocol}"
    return lambda agent_id: ModelEndpoint(f"{prefix}/{agent_id}", config.endpoint.base_url, None)


def run_one(client: Any, config: RunnerConfig, scenario: Scenario, overlays: dict[str, bytes]) -> dict[str, Any]:
    """Run one scenario and keep its prediction in its folder.

    Raises:
        SandboxUnavailableError: the container engine failed.
    """
    folder = runfolder.scenario_folder(config.run_dir, scenario.row["scenario_id"])
    bench = Workbench.open(client, scenario.spec, config.container_key, config.settings, overlays)
    ctx = Context(bench, config.adapter, endpoint_for(config, scenario), config.budget, config.command_timeout, folder)
    outcome, seconds = run_scenario(ctx, scenario)
    line = runfolder.prediction(scenario, outcome, seconds, config.name, config.adapter, config.endpoint,
                                config.budget, config.run_dir)
    runfolder.write_prediction(config.run_dir, line)
    return line


def run_all(client: Any, config: RunnerConfig, scenarios: list[Scenario],
            overlays: Callable[[TaskSpec], dict[str, bytes]]) -> RunSummary:
    """Run every scenario not finished yet, `max_workers` at a time (here, or as Ray tasks with the ray executor);
    write `predictions.jsonl` of all finished."""
    summary = RunSummary()
    todo = []
    for scenario in scenarios:
        if runfolder.finished(config.run_dir, scenario.row["scenario_id"]) is not None:
            summary.reused += 1
        else:
            todo.append(scenario)

    def attempt(scenario: Scenario) -> None:
        scenario_id = scenario.row["scenario_id"]
        try:
            run_one(client, config, scenario, overlays(scenario.spec))
            print(f"done: {scenario_id}", file=sys.stderr)
        except SandboxUnavailableError as exc:
            summary.failed[scenario_id] = str(exc)
            print(f"infrastructure error, not finished: {scenario_id}: {exc}", file=sys.stderr)

    if config.executor == "ray":
        from asyncodebench.agents.ray_scenarios import run_scenarios

        run_scenarios(config, todo, overlays, summary.failed)
    else:
        with ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="scenario") as pool:
            list(pool.map(attempt, todo))
    for scenario in scenarios:
        line = runfolder.finished(config.run_dir, scenario.row["scenario_id"])
        if line is not None:
            summary.lines.append(line)
    runfolder.write_predictions(config.run_dir, summary.lines)
    return summary
