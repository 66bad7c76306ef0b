"""Lookups in the agent-runner tests' shared runs: `{"runs": {name: {"lines": [...]}}, "eval": EvalRun}`."""

from __future__ import annotations

from typing import Any


def line(runs: dict[str, Any], name: str, protocol: str) -> dict[str, Any]:
    """The one prediction line run_agents.py wrote for the run `name` under `protocol`."""
    (found,) = [p for p in runs["runs"][name]["lines"] if p["protocol"] == protocol]
    return found


def scored(runs: dict[str, Any], name: str, protocol: str) -> dict[str, Any]:
    """The one row evaluate.py's report gives that prediction."""
    (found,) = [p for p in runs["eval"].report["predictions"]
                if p["model_name_or_path"] == name and p["protocol"] == protocol]
    return found
