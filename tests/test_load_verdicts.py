"""Honest predictions get exactly their quiet-machine verdicts on a loaded machine (issue 27, "under load").

The demo's gold, empty and partial predictions run in one evaluate.py run beside a CPU hog (helpers.load.CpuLoad)
with the official limits (a demo test takes well under a second; the limits only bound hangs, so load cannot turn
a verdict into a timeout). Each must score what tests/test_evaluate_demo.py says it scores on a quiet machine, with
no tampering, nothing left for review and no infrastructure error: whatever load does to a process's evidence
(its output stream's end, a late report) is run again, never scored. No assertion depends on time.
"""

from __future__ import annotations

import os
import secrets
from typing import Any, Callable

import pytest
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import SCORING_FLAGS, EvalRun
from helpers.load import CpuLoad
from helpers.predictions import example_predictions

pytestmark = pytest.mark.docker

# (final success, tests passed, denominator, ADPR): the quiet-machine figures of tests/test_evaluate_demo.py.
QUIET = {"demo-gold": (True, 25, 25, 1.0), "demo-empty": (False, 7, 25, 0.0), "demo-partial": (False, 17, 25, 0.0)}


@pytest.fixture(scope="module")
def loaded_run(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> tuple[EvalRun, CpuLoad]:
    examples = example_predictions()
    lines: list[dict[str, Any] | bytes] = [examples[model] for model in QUIET]
    run_id = f"loaded-honest-{secrets.token_hex(3)}"  # this session's own
    with CpuLoad() as load:
        run = evaluate(lines, demo_dataset.path, *SCORING_FLAGS, "--max-workers", "2", run_id=run_id)
    return run, load


def test_honest_predictions_keep_their_quiet_verdicts_beside_a_cpu_hog(loaded_run: tuple[EvalRun, CpuLoad]) -> None:
    run, load = loaded_run
    # The condition, on the hogs' own counters: at every sample at least 8 runnable hogs per CPU (the run queue a
    # load average of 8x the CPUs counts), all of them to the run's end, taking CPU time.
    assert load.min_runnable >= 8 * len(os.sched_getaffinity(0)), load.min_runnable
    assert (load.alive_at_end, load.cpu_seconds > 0) == (load.processes, True), (load.alive_at_end, load.cpu_seconds)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.report["counts"]["infrastructure_errors"] == 0
    for model, (success, passed, denominator, adpr) in QUIET.items():
        result = run.result(model)
        assert (result["final_success"], result["tests_passed"], result["tests_denominator"], result["adpr"]) == (
            success, passed, denominator, adpr), model
        integrity = result["integrity"]
        assert (integrity["violation"], integrity["tampering"], integrity["needs_review"]) == (None, [], []), (
            model, integrity["tampering"], integrity["needs_review"])
        assert integrity["collected_by_identity"]["missing_count"] == 0, model
