"""The agent-runner tests' shared runs: run_agents.py with a scripted model under a model name, then one evaluate.py
run on all their predictions, kept as `{"runs": {name: {"dir", "containers_left", "stderr", "lines"}}, "eval":
EvalRun}`, and lookups in them."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Callable

from helpers.agent_scripts import run_agents, write_scripts
from helpers.containers import run_containers
from helpers.demo_run import SCORING_FLAGS, EvalRun


def scripted_run(out: Path, name: str, scripts: dict[str, list[Any]], dataset: Path, *flags: str) -> dict[str, Any]:
    """run_agents.py with `scripts` as the model `name` (its predictions' model_name_or_path); it must exit 0."""
    run_id = f"{name}-{secrets.token_hex(3)}"
    done = run_agents(write_scripts(out / f"{name}.json", scripts), dataset, out, run_id, "--name", name, *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    predictions = out / run_id / "predictions.jsonl"
    return {"dir": out / run_id, "containers_left": run_containers(run_id), "stderr": done.stderr,
            "lines": [json.loads(text) for text in predictions.read_text().splitlines()]}


def evaluated_runs(runs: dict[str, dict[str, Any]], out: Path, dataset: Path, evaluate: Callable[..., EvalRun],
                   prefix: str) -> dict[str, Any]:
    """One evaluate.py run (it must exit 0) on every prediction of `runs`, with them."""
    combined = out / "all.jsonl"
    combined.write_text("".join(json.dumps(p) + "\n" for run in runs.values() for p in run["lines"]))
    evaluated = evaluate(combined, dataset, *SCORING_FLAGS, run_id=f"{prefix}-{secrets.token_hex(3)}")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    return {"runs": runs, "eval": evaluated}


def line(runs: dict[str, Any], name: str, protocol: str) -> dict[str, Any]:
    """The one prediction line run_agents.py wrote for the run `name` under `protocol`."""
    (found,) = [p for p in runs["runs"][name]["lines"] if p["protocol"] == protocol]
    return found


def scored(runs: dict[str, Any], name: str, protocol: str) -> dict[str, Any]:
    """The one row evaluate.py's report gives that prediction."""
    (found,) = [p for p in runs["eval"].report["predictions"]
                if p["model_name_or_path"] == name and p["protocol"] == protocol]
    return found
