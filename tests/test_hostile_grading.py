"""Evaluated code cannot change its own grade (the grading-integrity attack suite).

40 hostile predictions (tests/hostile_payloads.py: 7 attack classes, on final patches, checkpoint states and agent
patches) run in ONE evaluate.py run with two workers, beside the empty patch (what the base state honestly scores)
and the gold patch. Each hostile one must: get no final success, score no more pass rate and ADPR than the base
state, resolve no dependency the base state does not, and stay a scored model outcome. The run must leave no
container or volume, write nothing on the host outside its run folder, and keep the harness's memory bounded while
the evaluated code writes gigabytes at it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import json

from conftest import DemoDataset, EvalRun, evaluate_command, jsonl, prediction, run_containers, script_env
from hostile_payloads import HOST_MARKER, PatchMaker, Payload, payloads

pytestmark = pytest.mark.docker

RUN_ID = "hostile-grading"
PAYLOAD_COUNT = 40
MIB = 1 << 20
HARNESS_PEAK_LIMIT = 600 * MIB  # the evaluated code writes 2 GiB of output and a 300 MiB report at it
GOLD = Path(__file__).resolve().parent.parent / "data" / "demo" / "patches" / "gold.patch"
HAZARD_PAYLOADS = {
    "shadow-pytest-at-root", "shadow-pytest-package-in-src", "entry-point-plugin", "sitecustomize-module",
    "sitecustomize-package", "usercustomize-module", "shadow-stdlib-json", "conftest-at-root", "pytest-ini-addopts",
    "pyproject-addopts", "startup-pth-file",
}
UNSAFE_PAYLOADS = {"quoted-dotgit-path", "context-diff-into-git", "symlink-out-of-tree", "symlink-into-git",
                   "plus-header-dotdot"}
UNREADABLE_REPORTS = {"report-deeply-nested": "not_json", "report-oversized": "oversized",
                      "report-malformed": "not_json", "report-path-blocked": "missing"}


@pytest.fixture(scope="session")
def attack_suite() -> Iterator[list[Payload]]:
    maker = PatchMaker()
    try:
        yield payloads(maker)
    finally:
        maker.close()


@pytest.fixture(scope="session")
def hostile_run(demo_dataset: DemoDataset, attack_suite: list[Payload],
                tmp_path_factory: pytest.TempPathFactory) -> EvalRun:
    """The whole suite in one evaluate.py process, whose peak memory is read from the kernel (wait4)."""
    Path(HOST_MARKER).unlink(missing_ok=True)
    out = tmp_path_factory.mktemp("hostile-grading")
    preds = out / "preds.jsonl"
    preds.write_bytes(jsonl([prediction("honest-base", ""), prediction("honest-gold", GOLD.read_text()),
                             *(p.line for p in attack_suite)]))
    free_before = shutil.disk_usage("/var/lib/docker" if Path("/var/lib/docker").exists() else "/").free
    argv = evaluate_command(preds, demo_dataset.path, RUN_ID, out, "--timeout", "60", "--probe-timeout", "10",
                            "--max-workers", "2", "--memory", "1g", "--pids", "256")
    with open(out / "stdout", "wb") as stdout, open(out / "stderr", "wb") as stderr:
        process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=script_env())
        _, status, usage = os.wait4(process.pid, 0)  # reaped here, so its own rusage (peak memory) is known
        process.returncode = os.waitstatus_to_exitcode(status)
    time.sleep(1)
    report_file = out / RUN_ID / "report.json"
    run = EvalRun(process.returncode, (out / "stdout").read_text(errors="replace"),
                  (out / "stderr").read_text(errors="replace"), out / RUN_ID,
                  json.loads(report_file.read_text()) if report_file.exists() else None)
    label = run.report["run"]["container_label"] if run.report else RUN_ID
    run.extra.update(peak_rss=usage.ru_maxrss * 1024, containers_left=run_containers(RUN_ID), label=label,
                     volumes_left=_run_volumes(label),
                     marker_exists=Path(HOST_MARKER).exists(),
                     free_drop=free_before - shutil.disk_usage(
                         "/var/lib/docker" if Path("/var/lib/docker").exists() else "/").free)
    return run


def _run_volumes(label: str) -> list[str]:
    """The volumes labelled with the run's container label (`<run id>-<8 hex>`, the key of its run folder)."""
    done = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"label=org.asyncodebench.run_id={label}"],
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


def _names(suite: list[Payload]) -> list[str]:
    return [p.name for p in suite]


def test_the_suite_covers_every_attack_class_in_every_place(attack_suite: list[Payload]) -> None:
    assert len(attack_suite) >= PAYLOAD_COUNT
    assert len({p.name for p in attack_suite}) == len(attack_suite)
    classes = {p.attack_class for p in attack_suite}
    assert classes >= set(range(1, 8))
    assert {p.where for p in attack_suite} == {"final", "checkpoint", "agents"}
    for attack_class in classes:
        assert sum(p.attack_class == attack_class for p in attack_suite) >= 2, attack_class


def test_honest_patches_score_as_before(hostile_run: EvalRun) -> None:
    base, gold = hostile_run.row("honest-base"), hostile_run.row("honest-gold")
    assert (base["final_success"], base["tests_passed"], base["tests_denominator"]) == (False, 7, 25)
    assert (gold["final_success"], gold["pass_rate"], gold["adpr"]) == (True, 1.0, 1.0)
    baseline = hostile_run.report["run"]["baselines"]["asyncodebench-demo:minicache"]
    assert baseline["matches_recorded"] is True and baseline["problem"] is None


def _passing_groups(trace: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str]]:
    return {(dep, group) for dep, steps in trace.items() for step in steps
            for group in ("upstream", "downstream", "integrated") if step.get(group)}


def _credit_beyond_the_base(run: EvalRun, name: str) -> list[str]:
    """What a hostile prediction got that the base state does not (nothing, when grading holds)."""
    base, row = run.row("honest-base"), run.row(name)
    if row["status"] != "evaluated":
        return [f"{row['status']}: {row.get('infrastructure_error')}"]
    found = ["final success"] if row["final_success"] is not False else []
    found += ["pass rate"] if row["pass_rate"] > base["pass_rate"] else []
    found += ["ADPR"] if row["adpr"] > base["adpr"] else []
    extra = _passing_groups(row["dependency_trace"]) - _passing_groups(base["dependency_trace"])
    return found + [f"probe groups {sorted(extra)}"] * bool(extra)


def test_no_hostile_prediction_gets_more_than_the_base_state(hostile_run: EvalRun,
                                                             attack_suite: list[Payload]) -> None:
    offenders = {p.name: _credit_beyond_the_base(hostile_run, p.name) for p in attack_suite}
    assert {name: what for name, what in offenders.items() if what} == {}


def test_skips_and_xfails_from_code_under_test_are_integrity_failures(hostile_run: EvalRun) -> None:
    for name in ("skip-unittest", "skip-pytest", "xfail-pytest", "agents-skip-their-stubs"):
        result = hostile_run.result(name)
        assert result["evaluator"]["exit_code"] == 0, name  # pytest itself was fooled
        assert result["outcome"] == "model_failure:integrity_skip_inflation", name
    shrunk = hostile_run.result("skip-module-level")
    assert shrunk["final_success"] is False and shrunk["tests_denominator"] == 25


def test_startup_and_plugin_files_are_removed_and_recorded(hostile_run: EvalRun) -> None:
    for name in HAZARD_PAYLOADS:
        row = hostile_run.row(name)
        assert row["hazards_removed"], name
        assert row["tests_passed"] == 7, name
    assert "pytest_jsonreport.plugin" in hostile_run.result("honest-base")["protection"]["image_plugins"]


def test_paths_that_leave_the_work_tree_are_refused(hostile_run: EvalRun) -> None:
    for name in UNSAFE_PAYLOADS:
        row = hostile_run.row(name)
        assert (row["patch_status"], row["outcome"]) == ("unsafe_paths", "model_failure:patch_unsafe_paths"), name
    states = json.loads((hostile_run.folder("checkpoint-quoted-git-hook") / "states.json").read_text())
    assert states[0]["preparation"]["patch_status"] == "unsafe_paths"
    assert hostile_run.extra["marker_exists"] is False


def test_unreadable_reports_are_model_failures_that_stay_in_the_means(hostile_run: EvalRun) -> None:
    for name, problem in UNREADABLE_REPORTS.items():
        result = hostile_run.result(name)
        assert result["integrity"]["report_problem"] == problem, name
        assert result["status"] == "evaluated" and result["tests_denominator"] == 25, name
    summary = {(r["model_name_or_path"]): r for r in hostile_run.report["summary"]}
    assert summary["report-oversized"]["evaluated"] == 1


def test_a_test_ended_by_keyboard_interrupt_is_not_a_passed_probe(hostile_run: EvalRun) -> None:
    """pytest-json-report marks a test interrupted before its call phase as passed; the harness does not."""
    statuses = hostile_run.result("keyboard-interrupt")["probes"]["statuses"]
    assert "passed" not in {statuses[s] for s in statuses if s.startswith("tests/test_api.py")}


def test_a_fork_bomb_holding_the_process_limit_after_the_report_is_still_scored(hostile_run: EvalRun) -> None:
    """No process can start in that container any more, not even the harness's: the freeze alone stops it, and the
    report pytest wrote is read and scored as it is."""
    result = hostile_run.result("fork-bomb-after-the-report")
    assert (result["status"], result["tests_passed"]) == ("evaluated", 7)
    assert result["evaluator"]["exit_code"] in (1, 124)  # the bomb may slow the evaluator's exit past its limit


def test_leftover_processes_cannot_rewrite_the_report(hostile_run: EvalRun) -> None:
    for name in ("daemon-rewrites-report-at-once", "daemon-rewrites-report-late"):
        result = hostile_run.result(name)
        assert result["evaluator"]["summary"]["passed"] == 7, name
        assert result["evaluator"]["summary"]["total"] == 25, name


def test_evaluated_code_runs_unprivileged_on_a_read_only_bounded_filesystem(hostile_run: EvalRun) -> None:
    output = (hostile_run.folder("isolation-probe") / "evaluator_output.txt").read_text()
    for target in ("/usr/lib/python3/dist-packages/planted.pth", "/testbed/.git/hooks/post-commit",
                   "/asyncodebench/prepare.py", "/planted"):
        assert f"ISOLATION refused {target}" in output, target
    for target in ("/testbed/planted.txt", "/tmp/planted.txt"):
        assert f"ISOLATION writable {target}" in output, target
    assert "ISOLATION uid=65534" in output
    assert "ISOLATION exec /tmp ran" in output and "ISOLATION exec /testbed ran" in output
    limits = [line.split() for line in output.splitlines() if line.startswith("ISOLATION limits")]
    assert len(limits) == 3
    for _, _, mount, size, inodes in limits:
        assert int(size.split("=")[1]) <= 4 << 30 and int(inodes.split("=")[1]) <= 1_000_000, mount


def test_the_run_leaves_nothing_and_the_harness_stays_small(hostile_run: EvalRun) -> None:
    assert hostile_run.returncode == 0, hostile_run.stderr[-3000:]
    assert hostile_run.extra["label"].startswith(f"{RUN_ID}-")  # the label the volumes were looked up by
    assert hostile_run.extra["containers_left"] == [] and hostile_run.extra["volumes_left"] == []
    assert hostile_run.extra["peak_rss"] < HARNESS_PEAK_LIMIT, hostile_run.extra["peak_rss"]
    assert hostile_run.extra["free_drop"] < 1 << 30  # the work-tree flood stayed in its bounded tmpfs
    flood = hostile_run.folder("stdout-flood-2-gib") / "evaluator_output.txt"
    assert flood.stat().st_size <= 1_000_000


def test_the_report_shows_integrity_and_scope_flags(hostile_run: EvalRun) -> None:
    row = hostile_run.row("skip-unittest")
    assert row["integrity_violation"] == "integrity_skip_inflation"
    assert hostile_run.row("report-oversized")["report_problem"] == "oversized"
    assert hostile_run.row("sitecustomize-module")["out_of_scope_paths"] == ["evil_plugin.py"]
    assert hostile_run.row("conftest-at-root")["out_of_scope_paths"] == []  # removed as a hazard, not an edit
    summary = {r["model_name_or_path"]: r for r in hostile_run.report["summary"]}
    assert summary["skip-unittest"]["integrity_violations"] == 1
    assert summary["honest-gold"]["integrity_violations"] == 0 and summary["honest-gold"]["out_of_scope_edits"] == 0
    markdown = (hostile_run.run_dir / "report.md").read_text()
    assert "integrity_skip_inflation" in markdown and "path(s) outside the writable paths" in markdown
