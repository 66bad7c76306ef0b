"""Running scripts/evaluate.py as a user would, and reading what the run left in its folder."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncodebench.run.runfolder import prediction_folders
from helpers.checkout import ROOT, SCRIPTS, script_env
from helpers.predictions import jsonl

# Short limits keep the Docker suite fast; the demo tests finish in about a second each.
FAST_FLAGS = ("--timeout", "20", "--probe-timeout", "10")
# The agent runner's tests assert exact DRS and CAIL: a probe timed out on a loaded machine would move them, so
# they score with the default limits (a demo probe takes well under a second; the limits only bound hangs).
SCORING_FLAGS: tuple[str, ...] = ()
# Limits of the shared demo run; the hostile tests check the bounds against these.
SHARED_RUN_MEMORY, SHARED_RUN_PIDS, SHARED_RUN_WORKERS = "1g", 256, 3
NATIVE_RUN_BUILD_SECONDS = 30  # the native demo run's --build-timeout: it bounds the hostile builds that never end; an
# honest vecstats build takes 1 to 2 s on a quiet machine, and 8 s was too short beside a loaded run (checkpoint builds
# timed out, 2026-12-07)


@dataclass
class EvalRun:
    """One finished `scripts/evaluate.py` process and what it left in its run folder."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    report: dict[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self, model: str) -> dict[str, Any]:
        (row,) = [p for p in self.report["predictions"] if p["model_name_or_path"] == model]
        return row

    def folder(self, model: str) -> Path:
        (folder,) = [f for f in prediction_folders(self.run_dir) if f.name.startswith(f"{model}__")]
        return folder

    def result(self, model: str) -> dict[str, Any]:
        return json.loads((self.folder(model) / "result.json").read_text())


def evaluate_command(predictions_file: Path, dataset: Path, run_id: str, output_dir: Path, *flags: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / "evaluate.py"), str(predictions_file), "--dataset", str(dataset),
            "--run-id", run_id, "--output-dir", str(output_dir), *flags]


def run_evaluate(predictions: list[dict[str, Any] | bytes] | Path, dataset: Path, run_id: str, output_dir: Path,
                 *flags: str, env: dict[str, str] | None = None, timeout: float = 900) -> EvalRun:
    """Run evaluate.py as a user would, in its own process; return the parsed report.json (None if absent)."""
    if isinstance(predictions, Path):
        preds_file = predictions
    else:
        preds_file = output_dir / f"{run_id}.jsonl"
        preds_file.parent.mkdir(parents=True, exist_ok=True)
        preds_file.write_bytes(jsonl(predictions))
    done = subprocess.run(evaluate_command(preds_file, dataset, run_id, output_dir, *flags), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=script_env(env))
    report_file = output_dir / run_id / "report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else None
    return EvalRun(done.returncode, done.stdout, done.stderr, output_dir / run_id, report)


def without_run_metadata(report: dict[str, Any]) -> dict[str, Any]:
    """A report minus what legitimately differs between two runs of the same file: the run's times, ids and paths,
    and each prediction's output_tail (the evaluator's own output carries durations and random sentinel names)."""
    predictions = [{k: v for k, v in p.items() if k != "output_tail"} for p in report.get("predictions", [])]
    return {**{k: v for k, v in report.items() if k != "run"}, "predictions": predictions}
