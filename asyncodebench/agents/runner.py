"""Run chosen scenarios into a run folder: each one once (a finished scenario is kept on resume), several at a time
with `max_workers`, and write the predictions file of every finished scenario.

A scenario whose containers fail for an infrastructure reason (the daemon, the image) is reported and left
unfinished, so a rerun of the same command does it again; what agents do is never an infrastructure failure. A
scenario in which an agent or the manager ended with an invalid termination (its model endpoint failed, METRICS
section 9) is kept as `invalid.json`, not as a prediction: it is reported, left unfinished and redone the same way
(its earlier attempt set aside under `invalid-attempts/`).
"""

from __future__ import annotations

import fnmatch
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from asyncodebench.agents import runfolder
from asyncodebench.agents.protocols import IMPLEMENTED
from asyncodebench.agents.scenario_run import RunnerConfig, run_one
from asyncodebench.agents.team import Scenario
from asyncodebench.dataset.sources import Rows
from asyncodebench.harness.sandbox import SandboxUnavailableError
from asyncodebench.harness.spec import TaskSpec


class NoScenarioError(ValueError):
    """The patterns chose no scenario the runner can run."""


@dataclass
class RunSummary:
    """Every selected scenario's prediction, in selection order (finished ones), the failed ones with why, and the
    invalid ones (an invalid termination) with why."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
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
            moved = runfolder.set_aside_invalid(config.run_dir, scenario.row["scenario_id"])
            if moved is not None:
                print(f"redoing an invalid scenario: {scenario.row['scenario_id']} (its attempt kept in {moved})",
                      file=sys.stderr)
            todo.append(scenario)

    def attempt(scenario: Scenario) -> None:
        scenario_id = scenario.row["scenario_id"]
        try:
            line = run_one(client, config, scenario, overlays(scenario.spec))
            if line["runner"]["valid"]:
                print(f"done: {scenario_id}", file=sys.stderr)
            else:
                print(f"invalid, not a result: {scenario_id}: {runfolder.invalid_reasons(line)}", file=sys.stderr)
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
        elif (invalid := runfolder.invalid_line(config.run_dir, scenario.row["scenario_id"])) is not None:
            summary.invalid[scenario.row["scenario_id"]] = runfolder.invalid_reasons(invalid)
    runfolder.write_predictions(config.run_dir, summary.lines)
    return summary
