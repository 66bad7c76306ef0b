"""One scenario run, whichever executor runs it: what every scenario of a run shares (`RunnerConfig`), each agent's
model endpoint, and `run_one`, which runs a scenario's protocol and keeps its prediction in its folder.

The local executor (`runner.py`) and the Ray executor (`ray_scenarios.py`, on a node) both call `run_one`; it lives
below both so neither imports the other for it.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from asyncodebench.agents import runfolder
from asyncodebench.agents.adapter import AgentAdapter, ModelEndpoint
from asyncodebench.agents.cost import ScenarioCost
from asyncodebench.agents.protocols import run_scenario
from asyncodebench.agents.team import Context, Scenario
from asyncodebench.harness.evaluation import Settings, Workbench

SCRIPTED = "scripted"


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
    allow_pull: bool = False  # with ray: a node without the task's image pulls it by digest


def endpoint_for(config: RunnerConfig, scenario: Scenario) -> Callable[[str], ModelEndpoint]:
    """Each agent's endpoint: the configured one, or under the scripted server its own agent name."""
    if not config.scripted:
        return lambda agent_id: config.endpoint
    prefix = f"{SCRIPTED}/{scenario.row['task_id']}/{scenario.protocol}"
    return lambda agent_id: dataclasses.replace(config.endpoint, name=f"{prefix}/{agent_id}", api_key_env=None)


def run_one(client: Any, config: RunnerConfig, scenario: Scenario, overlays: dict[str, bytes]) -> dict[str, Any]:
    """Run one scenario and keep its prediction in its folder.

    Raises:
        SandboxUnavailableError: the container engine failed.
    """
    folder = runfolder.scenario_folder(config.run_dir, scenario.row["scenario_id"])
    bench = Workbench.open(client, scenario.spec, config.container_key, config.settings, overlays)
    scenario_id = scenario.row["scenario_id"]
    ctx = Context(bench, config.adapter, endpoint_for(config, scenario), config.budget, config.command_timeout, folder,
                  lambda text: print(f"{scenario_id}: {text}", file=sys.stderr, flush=True),
                  ScenarioCost(config.endpoint.cost) if config.endpoint.cost.priced else None)
    outcome, seconds = run_scenario(ctx, scenario)
    line = runfolder.prediction(scenario, outcome, seconds, config.name, config.adapter, config.endpoint,
                                config.budget, config.run_dir)
    runfolder.write_prediction(config.run_dir, line)
    return line
