"""End to end on the demo task with real containers: the example predictions get the scores the task promises.

All assertions read one shared run (`shared_demo_run` in conftest.py: every example line, three workers,
`--timeout 20 --probe-timeout 10`).
"""

from __future__ import annotations

import json

import pytest
import yaml
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID
from helpers.demo_run import EvalRun

from asyncodebench.harness.workspace import KILL_GRACE_SECONDS

pytestmark = pytest.mark.docker

TASK = yaml.safe_load((DEMO_DIR / "task.yaml").read_text())
BASE = next(s for s in TASK["expected_test_counts"] if s["snapshot_id"] == "demo_base")
UPSTREAM = sorted({s for dep in TASK["dependencies"] for s in dep["upstream_probe_tests"]})
INTEGRATED = sorted({s for dep in TASK["dependencies"] for s in dep["integrated_probe_tests"]})


def test_the_run_evaluates_every_line_and_exits_0(shared_demo_run: EvalRun) -> None:
    report = shared_demo_run.report
    assert shared_demo_run.returncode == 0, shared_demo_run.stderr[-3000:]
    assert report["counts"]["evaluated"] == report["counts"]["valid_predictions"] == len(shared_demo_run.extra["lines"])
    assert report["counts"]["infrastructure_errors"] == report["counts"]["not_evaluated"] == 0


def test_gold_is_a_final_success_with_every_test_and_dependency_passing(shared_demo_run: EvalRun) -> None:
    row = shared_demo_run.row("demo-gold")
    assert row["final_success"] is True and row["outcome"] == "passed"
    assert row["pass_rate"] == 1.0 and row["tests_passed"] == row["tests_denominator"] == BASE["collected"]
    assert row["adpr"] == 1.0 and row["adpr_numerator"] == row["adpr_denominator"] == len(TASK["dependencies"])


def test_empty_patch_scores_the_base_state_of_the_task(shared_demo_run: EvalRun) -> None:
    row, result = shared_demo_run.row("demo-empty"), shared_demo_run.result("demo-empty")
    assert result["patch"]["empty"] is True and row["patch_status"] == "empty"
    assert (row["tests_passed"], row["tests_denominator"]) == (BASE["passed"], BASE["collected"]) == (7, 25)
    summary = result["evaluator"]["summary"]
    assert ((summary["failed"], summary["errors"], summary["skipped"])
            == (BASE["failed"], BASE["errors"], BASE["skipped"]))
    assert row["final_success"] is False and row["adpr"] == 0.0


def test_partial_passes_the_producer_side_only(shared_demo_run: EvalRun) -> None:
    """The partial patch writes the cache core (producer) but not memoize (consumer): every upstream probe passes,
    no integrated group does, so ADPR is 0 with 17 of 25 tests passing."""
    row, result = shared_demo_run.row("demo-partial"), shared_demo_run.result("demo-partial")
    assert (row["tests_passed"], row["tests_denominator"], row["final_success"]) == (17, 25, False)
    assert row["adpr"] == 0.0 and row["adpr_denominator"] == 3
    statuses = result["probes"]["statuses"]
    assert {s: statuses[s] for s in UPSTREAM} == dict.fromkeys(UPSTREAM, "passed")
    assert any(statuses[s] != "passed" for s in INTEGRATED)
    checkpoint = json.loads((shared_demo_run.folder("demo-partial") / "dependency_probe_checkpoints.jsonl")
                            .read_text().splitlines()[-1])
    groups = {d["dependency_id"]: d["groups"] for d in checkpoint["dependency_results"]}
    assert all(g["upstream"]["passed"] and not g["integrated"]["passed"] for g in groups.values())


def test_syntax_error_is_a_collection_failure_scored_against_the_expected_total(shared_demo_run: EvalRun) -> None:
    row = shared_demo_run.row("demo-syntax-error")
    assert row["outcome"] == "model_failure:collection_failed" and row["failure_kind"] == "collection_failed"
    assert (row["tests_passed"], row["tests_denominator"], row["pass_rate"]) == (0, 25, 0.0)
    assert row["denominator_source"].startswith("expected_total_due_")


def test_infinite_loop_times_out_and_no_container_of_the_run_is_left(shared_demo_run: EvalRun) -> None:
    """The inside `timeout` stops the loop (exit 124, not the host watchdog) and every container is removed."""
    row, result = shared_demo_run.row("hostile-infinite-loop"), shared_demo_run.result("hostile-infinite-loop")
    assert row["outcome"] == "model_failure:timeout" and row["pass_rate"] == 0.0
    assert result["evaluator"]["timed_out"] is True and result["evaluator"]["exit_code"] == 124
    assert result["evaluator"]["killed_by_watchdog"] is False
    # It ran twice, the second time with twice the limit (METRICS decision 16), and still timed out: the model's.
    assert (result["evaluator"]["attempts"], result["evaluator"]["limits_seconds"]) == (2, [20, 40])
    # The evaluator phase ended at its limit (40 s), not when the loop would have: a bound, not a speed target.
    assert result["evaluator"]["seconds"] <= 40 + KILL_GRACE_SECONDS + 10
    assert shared_demo_run.extra["containers_left"] == []


def test_report_lists_the_run_metadata_and_every_prediction(shared_demo_run: EvalRun) -> None:
    report = shared_demo_run.report
    assert report["run"]["images"][DEMO_TASK_ID]["state"] == "match"
    assert report["run"]["settings"]["timeout_seconds"] == 20
    assert sorted(p["line"] for p in report["predictions"]) == list(range(1, len(shared_demo_run.extra["lines"]) + 1))
    assert (shared_demo_run.run_dir / "report.md").read_text().count("| asyncodebench-demo:minicache |") == len(
        report["predictions"])
