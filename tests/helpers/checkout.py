"""This checkout: its folders, the demo task's files and id, and the environment its scripts run in."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
DEMO_DIR = ROOT / "data" / "demo"
EXAMPLES = DEMO_DIR / "predictions" / "examples.jsonl"
PROTOCOLS_FILE = ROOT / "data" / "protocols.yaml"
DEMO_TASK_ID = "asyncodebench-demo:minicache"


def script_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for running scripts/: this checkout's package first, whatever copy pip installed."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}
