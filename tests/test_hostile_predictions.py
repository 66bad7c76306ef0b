"""Hostile predictions are scored as their code really behaves, without harming the host or the other predictions.

Every hostile line of data/demo/predictions/examples.jsonl, two patches with non-UTF-8 bytes and the gold patch run
in ONE evaluate.py run with three workers (`shared_demo_run` in conftest.py) beside a CPU load, while the run's own
containers are sampled.
"""

from __future__ import annotations

import os

import pytest
from helpers.demo_run import SHARED_RUN_MEMORY, SHARED_RUN_PIDS, EvalRun
from helpers.payloads.tamper import SWARMS
from helpers.predictions import LATIN1_PATCH, example_predictions

pytestmark = pytest.mark.docker

BASE_PASSED, TOTAL = 7, 25
HOSTILE = sorted(m for m in example_predictions() if m.startswith("hostile-"))
UNBOUNDED_FORKS = 4096  # what the fork bomb reaches per call without a process limit (12 doublings)
GIB = 1 << 30


def _output(run: EvalRun, model: str) -> str:
    return (run.folder(model) / "evaluator_output.txt").read_text(errors="replace")


def test_every_hostile_line_is_evaluated_not_an_infrastructure_error(shared_demo_run: EvalRun) -> None:
    assert len(HOSTILE) == 11
    for model in HOSTILE + ["hostile-latin1-raw", "hostile-latin1-escaped"]:
        assert shared_demo_run.row(model)["status"] == "evaluated", model


def test_the_demo_completes_on_a_loaded_machine_with_no_infrastructure_error(shared_demo_run: EvalRun) -> None:
    """The shared run goes on beside a CPU load (helpers.load.CpuLoad): every prediction is a verdict, none an
    infrastructure error, with at least 8 hogs per CPU runnable at every sample (the run queue of a load average
    of 8x the CPUs), all of them to the run's end, taking CPU time meanwhile."""
    load = shared_demo_run.extra["load"]
    assert load.min_runnable >= 8 * len(os.sched_getaffinity(0)), load.min_runnable
    assert (load.alive_at_end, load.cpu_seconds > 0) == (load.processes, True), (load.alive_at_end, load.cpu_seconds)
    assert shared_demo_run.report["counts"]["infrastructure_errors"] == 0


def test_a_reforking_swarm_loses_the_race_on_a_loaded_machine_too(shared_demo_run: EvalRun) -> None:
    """The swarm of the hostile suite (a process that re-forks every round and rewrites the report from the start),
    here beside the CPU load: the launcher's kill(-1) ends it before the report is written, whoever is scheduled."""
    for name in SWARMS:
        result = shared_demo_run.result(name)
        assert result["integrity"]["tampering"] == [], (name, result["integrity"]["tampering"])
    summary = shared_demo_run.result(SWARMS[0])["evaluator"]["summary"]
    assert (summary["passed"], summary["total"]) == (BASE_PASSED, TOTAL)


def test_gold_in_the_same_run_still_scores_full_marks(shared_demo_run: EvalRun) -> None:
    row = shared_demo_run.row("demo-gold")
    assert (row["final_success"], row["pass_rate"], row["adpr"]) == (True, 1.0, 1.0)


def test_added_conftest_is_removed_and_recorded(shared_demo_run: EvalRun) -> None:
    """The conftest rewrites every report to "passed"; removed before the run, the base failures stay failures."""
    row = shared_demo_run.row("hostile-conftest")
    assert row["hazards_removed"] == ["conftest.py"]
    assert (row["tests_passed"], row["tests_denominator"], row["final_success"]) == (BASE_PASSED, TOTAL, False)


def test_edited_tests_are_restored_and_recorded(shared_demo_run: EvalRun) -> None:
    row = shared_demo_run.row("hostile-test-edit")
    assert sorted(row["restored_paths"]) == ["tests/test_api.py", "tests/test_core.py"]
    assert (row["tests_passed"], row["final_success"]) == (BASE_PASSED, False)


def test_forged_summary_lines_in_the_output_are_tampering(shared_demo_run: EvalRun) -> None:
    """The patch prints 50 `PASSED` lines and a fake summary after pytest's: the last summary line then disagrees
    with the report, which is tampering (decision 11), scored 0."""
    output = _output(shared_demo_run, "hostile-forged-output")
    assert output.count(" PASSED") == 50 and "25 passed in 0.01s" in output  # the forgery did happen
    row, result = shared_demo_run.row("hostile-forged-output"), shared_demo_run.result("hostile-forged-output")
    assert row["outcome"] == "model_failure:integrity_tampering"
    assert (row["tests_passed"], row["pass_rate"], row["final_success"]) == (0, 0.0, False)
    assert any("terminal summary" in t["reason"] for t in result["integrity"]["tampering"])


def test_fork_bomb_is_bounded_and_does_not_starve_the_probes(shared_demo_run: EvalRun) -> None:
    """The process limit stops the bomb inside its container (the kernel's count of the run's own containers, never
    the host's, which other work shares); the prediction completes (no timeout); its leftover children do not keep
    the probes from starting; no container of the run is left."""
    sampler = shared_demo_run.extra["sampler"]
    assert sampler.containers_seen, "the sampler never saw a container of the run"
    assert sampler.max_processes <= SHARED_RUN_PIDS < UNBOUNDED_FORKS
    assert shared_demo_run.extra["containers_left"] == []
    result = shared_demo_run.result("hostile-fork-bomb")
    assert result["evaluator"]["timed_out"] is False and result["evaluator"]["exit_code"] == 1
    assert result["outcome"] == "failed" and result["tests_passed"] >= BASE_PASSED
    # Every probe process really ran in its own container: none was refused or lost to the evaluator's leftovers.
    # The probes call the bomb too, so on a loaded machine one may run out of its own time; that is an outcome.
    statuses = result["probes"]["statuses"]
    assert set(statuses.values()) <= {"passed", "failed", "timed_out"}, statuses
    assert {"passed", "failed"} & set(statuses.values()), statuses


def test_memory_hog_is_killed_inside_its_container(shared_demo_run: EvalRun) -> None:
    """It asks for 16 GiB; the kernel kills it at the container's limit (exit 137): no container of the run was
    charged more than its limit."""
    result = shared_demo_run.result("hostile-memory-hog")
    assert result["evaluator"]["exit_code"] == 137 and result["evaluator"]["timed_out"] is False
    assert result["outcome"] == "model_failure:evaluator_failed" and result["pass_rate"] == 0.0
    limit = int(SHARED_RUN_MEMORY.rstrip("g")) * GIB
    assert 0 < shared_demo_run.extra["sampler"].max_memory <= limit


def test_network_calls_fail_inside_the_container(shared_demo_run: EvalRun) -> None:
    output = _output(shared_demo_run, "hostile-network")
    assert "hostile-network: connect 127.0.0.1:9: blocked" in output
    assert "hostile-network: resolve example.com: blocked" in output
    assert ": reached" not in output


def test_huge_output_is_capped_at_one_megabyte(shared_demo_run: EvalRun) -> None:
    """100 MiB written after pytest's summary: only the last megabyte is kept; with pytest's own summary line pushed
    out of it, the report cannot be checked against the run's output, which is tampering (scored 0)."""
    saved = shared_demo_run.folder("hostile-huge-output") / "evaluator_output.txt"
    assert saved.stat().st_size <= 1_000_000
    assert saved.read_text().rstrip().endswith("minicache")
    result = shared_demo_run.result("hostile-huge-output")
    assert result["outcome"] == "model_failure:integrity_tampering" and result["tests_passed"] == 0
    assert {t["reason"] for t in result["integrity"]["tampering"]} == {
        "the report lists tests but pytest printed no summary line"}


@pytest.mark.parametrize("model", ["hostile-dotdot-path", "hostile-absolute-path"])
def test_paths_outside_the_repository_are_refused(shared_demo_run: EvalRun, model: str) -> None:
    row, result = shared_demo_run.row(model), shared_demo_run.result(model)
    assert row["outcome"] == "model_failure:patch_unsafe_paths" and row["patch_status"] == "unsafe_paths"
    assert [p.endswith("tmp/asyncodebench-escape.txt") for p in result["patch"]["unsafe_paths"]] == [True]
    assert (row["tests_passed"], row["tests_denominator"]) == (0, TOTAL)
    assert shared_demo_run.extra["escape_file_exists"] is False


def test_binary_patch_is_applied_or_refused_cleanly(shared_demo_run: EvalRun) -> None:
    row, result = shared_demo_run.row("hostile-binary-diff"), shared_demo_run.result("hostile-binary-diff")
    assert row["patch_status"] in ("applied", "applied_with_fuzz", "failed")
    if row["patch_status"] == "failed":
        assert row["outcome"] == "model_failure:patch_did_not_apply"
    else:
        assert "minicache/_speedups.bin" in result["patch"]["changed_paths"]
        assert row["tests_passed"] == BASE_PASSED


@pytest.mark.parametrize("model", ["hostile-latin1-raw", "hostile-latin1-escaped"])
def test_patch_bytes_that_are_not_utf8_reach_the_container_unchanged(shared_demo_run: EvalRun, model: str) -> None:
    """Raw 0xE9 bytes in the JSONL line, or `\\udce9` escapes: the saved patch is byte for byte the model's, it
    applies, and the run goes on."""
    assert (shared_demo_run.folder(model) / "patch.diff").read_bytes() == LATIN1_PATCH
    result = shared_demo_run.result(model)
    assert result["patch"]["status"] == "applied" and result["patch"]["changed_paths"] == ["minicache/latin1.txt"]
    assert result["tests_passed"] == BASE_PASSED
