"""Evaluated code cannot change its own grade (the grading-integrity attack suite).

86 hostile predictions (tests/helpers/payloads/hostile.py and the modules it takes more from: 11 attack classes, on
final patches, checkpoint states and agent patches) run in ONE evaluate.py run with three workers, beside the empty
patch (what the base state honestly scores) and the gold patch. Each hostile one must: get no final success, score no
more pass rate and ADPR than the base state, resolve no dependency the base state does not, and stay a scored model
outcome, never an infrastructure error. The run must leave no container or volume, write nothing on the host
outside its run folder, and keep the harness's memory bounded while the evaluated code writes gigabytes at it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers.checkout import script_env
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import EvalRun, evaluate_command
from helpers.payloads.exhaust import EXHAUST_PAYLOADS
from helpers.payloads.hostile import HOST_MARKER, PatchMaker, Payload, payloads
from helpers.payloads.tamper import IN_PROCESS, SWARMS
from helpers.predictions import jsonl, prediction

pytestmark = pytest.mark.docker

RUN_ID = "hostile-grading"
PAYLOAD_COUNT = 86
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
    argv = evaluate_command(preds, demo_dataset.path, RUN_ID, out, "--timeout", "60", "--probe-timeout", "10",
                            "--max-workers", "3", "--memory", "1g", "--pids", "256")
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
                     marker_exists=Path(HOST_MARKER).exists())
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
    """No process can start in that container any more, not even the harness's: its init, which needs none, ends
    them all, and the report pytest wrote is read and scored as it is."""
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
    # The work-tree flood (8 GiB) stayed inside its container: the tmpfs it writes is charged to the container's
    # memory, so the kernel stops it there (no disk of the host is ever written: the root is read-only).
    fill = hostile_run.result("fill-work-tree")
    fill_output = (hostile_run.folder("fill-work-tree") / "evaluator_output.txt").read_text(errors="replace")
    assert fill["evaluator"]["exit_code"] == 137 or "FILL stopped" in fill_output
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


# --- decision 12: skips and xfails compared by test id (tests/helpers/payloads/skip.py) -------------------------

from helpers.dataset_folders import DemoDataset as _DemoDataset  # noqa: E402  (appended section)
from helpers.demo_run import run_evaluate  # noqa: E402
from helpers.payloads.skip import SKIP_PAYLOADS  # noqa: E402

DEMO_BASELINE = "baselines/asyncodebench-demo__minicache.json"
DEMO_FAILING = 18  # tests the demo's base state fails, every one of which the skip payloads turn into a skip or xfail


def test_the_demo_base_record_lists_its_skips_by_id(hostile_run: EvalRun) -> None:
    record = json.loads((hostile_run.run_dir / DEMO_BASELINE).read_text())
    assert record["skipped_or_xfailed_ids"] == []  # the demo skips nothing at base: there is nothing to un-skip
    assert hostile_run.result("honest-base")["integrity"]["baseline"]["skipped_or_xfailed_ids"] == 0


def test_failures_turned_into_skips_break_both_skip_rules_by_test_id(hostile_run: EvalRun) -> None:
    for name in SKIP_PAYLOADS:
        result = hostile_run.result(name)
        assert result["evaluator"]["exit_code"] == 0, name  # pytest itself was fooled
        assert (result["outcome"], result["final_success"]) == ("model_failure:integrity_skip_inflation", False), name
        integrity = result["integrity"]
        assert integrity["skip_rules_broken"] == ["count", "identity"], name
        newly = integrity["newly_skipped"]
        assert (newly["checked"], newly["count"], len(newly["node_ids"])) == (True, DEMO_FAILING, DEMO_FAILING), name
        assert all(n.startswith(("tests/test_core.py::", "tests/test_api.py::")) for n in newly["node_ids"]), name
        assert hostile_run.row(name)["newly_skipped_count"] == DEMO_FAILING, name
    for name in ("honest-base", "honest-gold"):
        assert hostile_run.result(name)["integrity"]["newly_skipped"] == {"checked": True, "count": 0,
                                                                          "node_ids": []}, name


def test_a_skip_that_replaces_a_base_failure_never_passes_a_probe(hostile_run: EvalRun) -> None:
    for name in SKIP_PAYLOADS:
        lines = (hostile_run.folder(name) / "dependency_probe_checkpoints.jsonl").read_text().splitlines()
        checkpoints = [json.loads(line) for line in lines]
        skipped_selectors = 0
        for checkpoint in checkpoints:
            for selector, probe in checkpoint["probe_test_results"].items():
                if any(n["outcome"] in ("skipped", "xfailed") for n in probe["matched_nodeids"]):
                    skipped_selectors += 1
                    assert (probe["status"], probe["passed"]) == ("failed", False), (name, selector)
        assert skipped_selectors > 0, name  # the probes did meet the skips


def test_review_flags_show_the_skips_raised_from_code_and_never_score(hostile_run: EvalRun) -> None:
    review = hostile_run.result("raw-skipped-exception")["integrity"]["review"]
    found = {(f["file"], f["line"], f["marker"]) for f in review["flags"]}
    assert ("minicache/core.py", 38, "import_pytest_internals") in found
    assert ("minicache/api.py", 19, "skip_from_code") in found
    checkpoint = hostile_run.result("checkpoint-final-state-skips-failures")["integrity"]["review"]
    assert {f["patch"] for f in checkpoint["flags"]} >= {"checkpoint 1 (agent_artifact, core_agent)",
                                                          "checkpoint 3 (final_integrated)"}
    agents = hostile_run.result("agents-xfail-and-skip")["integrity"]["review"]
    assert {f["patch"] for f in agents["flags"]} == {"agent_patches[core_agent]", "agent_patches[api_agent]"}
    for name in ("honest-base", "honest-gold"):
        assert hostile_run.result(name)["integrity"]["review"] == {"count": 0, "high": 0, "flags": []}, name
        assert hostile_run.row(name)["review_flag_count"] == 0, name
    # Flagged or not, a payload scores what the rules give it: the daemon payloads are flagged (os._exit) and still
    # score the base state's 7 passes.
    daemon = hostile_run.row("daemon-rewrites-report-at-once")
    assert daemon["review_flag_count"] > 0 and daemon["tests_passed"] == 7
    markdown = (hostile_run.run_dir / "report.md").read_text()
    assert "## Review flags (shown, never scored)" in markdown and "import_pytest_internals" in markdown


def _replay(hostile_run: EvalRun, demo_dataset: _DemoDataset, attack_suite: list[Payload], tmp_path: Path,
            name: str, base_skips: list[str] | None) -> dict[str, Any]:
    """Rescore one payload's saved evidence (its real pytest report) in a copy of the run, against a base record
    edited to have skipped `base_skips` (None: a record from before decision 12, with the count alone)."""
    keep = hostile_run.folder(name).name
    copy = tmp_path / RUN_ID
    shutil.copytree(hostile_run.run_dir, copy,
                    ignore=lambda folder, names: [n for n in names if n != keep] if folder.endswith("predictions")
                    else [])
    record = json.loads((copy / DEMO_BASELINE).read_text())
    record["counts"]["skipped"], record["counts"]["xfailed"] = DEMO_FAILING, 0
    if base_skips is None:
        record.pop("skipped_or_xfailed_ids")
    else:
        record["skipped_or_xfailed_ids"] = sorted(base_skips)
    (copy / DEMO_BASELINE).write_text(json.dumps(record))
    (payload,) = [p for p in attack_suite if p.name == name]
    run = run_evaluate([payload.line], demo_dataset.path, RUN_ID, tmp_path, "--rescore",
                       env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert run.returncode == 0, run.stderr[-3000:]
    return run.result(name)


def test_the_swap_is_caught_by_id_when_replayed_against_a_base_with_other_skips(
        hostile_run: EvalRun, demo_dataset: _DemoDataset, attack_suite: list[Payload],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The demo cannot express the swap (its base skips nothing), so its real reports are replayed against bases
    that skipped 18 tests: other tests (the swap: the count rule passes, the identity rule does not), the very
    tests the payload skips (no rule breaks), and the same count without ids (an old record: the count rule alone,
    which the swap games)."""
    name = "skip-core-xfail-api"
    skipped = hostile_run.result(name)["integrity"]["newly_skipped"]["node_ids"]
    other = [f"tests/test_elsewhere.py::test_{i}" for i in range(DEMO_FAILING)]
    swap = _replay(hostile_run, demo_dataset, attack_suite, tmp_path_factory.mktemp("swap"), name, other)
    assert (swap["outcome"], swap["final_success"]) == ("model_failure:integrity_skip_inflation", False)
    assert swap["integrity"]["skip_rules_broken"] == ["identity"]
    assert swap["integrity"]["newly_skipped"]["node_ids"] == skipped
    same = _replay(hostile_run, demo_dataset, attack_suite, tmp_path_factory.mktemp("same"), name, skipped)
    assert (same["outcome"], same["final_success"]) == ("passed", True)
    old = _replay(hostile_run, demo_dataset, attack_suite, tmp_path_factory.mktemp("old"), name, None)
    assert (old["outcome"], old["integrity"]["newly_skipped"]["checked"]) == ("passed", False)


TAMPERING_PAYLOADS = (*IN_PROCESS, "tamper-forged-report-then-exit", "checkpoint-tamper-hook-wrapper",
                      "agents-tamper-report-property")


def test_in_process_tampering_is_detected_and_scored_zero(hostile_run: EvalRun) -> None:
    """Eight forms of rewriting pytest's verdict from inside its process, each caught by the sentinels or the
    consistency checks (METRICS decision 11): model outcome, 0, listed with the process and the reason."""
    for name in TAMPERING_PAYLOADS:
        result = hostile_run.result(name)
        assert result["outcome"] == "model_failure:integrity_tampering", (name, result["outcome"])
        assert (result["final_success"], result["pass_rate"], result["tests_passed"]) == (False, 0.0, 0), name
        assert result["integrity"]["tampering"], name
        assert hostile_run.row(name)["integrity_violation"] == "integrity_tampering", name
    found = hostile_run.result("checkpoint-tamper-hook-wrapper")["integrity"]["tampering"]
    assert {f["process"].split(" probes")[0] for f in found} == {"state 1 (agent_artifact)"}
    for honest in ("honest-base", "honest-gold"):
        assert hostile_run.result(honest)["integrity"]["tampering"] == [], honest
        assert hostile_run.result(honest)["integrity"]["audit"] == [], honest


def test_the_audit_flags_what_the_runner_sees_changed(hostile_run: EvalRun) -> None:
    """Flags for review, never a score: the audit hook and the snapshot of pytest's classes name what was done."""
    expected = {
        "tamper-report-class-through-sys-modules": "pytest's _pytest.reports.TestReport.from_item_and_call replaced",
        "tamper-hook-wrapper-found-with-gc": "gc.get_objects",
        "tamper-json-report-writer": "pytest's pytest_jsonreport.plugin.JSONReport.save_report replaced",
        "tamper-property-on-the-report-class": "pytest's _pytest.reports.TestReport.outcome added",
        "checkpoint-tamper-hook-wrapper": "gc.get_objects",
    }
    for name, event in expected.items():
        assert event in {a["event"] for a in hostile_run.result(name)["integrity"]["audit"]}, name


def test_a_reforking_swarm_is_ended_before_the_report_is_written(hostile_run: EvalRun) -> None:
    """A process whose pid changes every round rewrites the report from the start: one kill(-1) ends it before
    pytest-json-report writes, so the report read is pytest's own (the base state's 7 of 25), with no contradiction."""
    for name in SWARMS:
        result = hostile_run.result(name)
        assert result["integrity"]["tampering"] == [], (name, result["integrity"]["tampering"])
    summary = hostile_run.result(SWARMS[0])["evaluator"]["summary"]
    assert (summary["passed"], summary["total"]) == (7, 25)
    base_trace = hostile_run.row("honest-base")["dependency_trace"]
    state = hostile_run.result(SWARMS[1])["dependency_trace"]
    groups = ("upstream", "downstream", "integrated")
    assert {(d, *(s[g] for g in groups)) for d, steps in state.items() for s in steps if s["step"] == 1} == {
        (d, *(steps[-1][g] for g in groups)) for d, steps in base_trace.items()}


# --- attack class 8: the preparation itself (tests/helpers/payloads/tree.py, issue 16) -------------------------

from helpers.payloads.tree import ATTRIBUTES, MANY_BYTECODE, MANY_FILES, ODD_SYMLINKS, TREE_ATTACK_CLASS, deep_path  # noqa: E402  (appended section)


def test_tree_attacks_are_model_outcomes_never_infrastructure_errors(hostile_run: EvalRun,
                                                                    attack_suite: list[Payload]) -> None:
    tree = [p for p in attack_suite if p.attack_class == TREE_ATTACK_CLASS]
    assert {p.where for p in tree} == {"final", "checkpoint", "agents"}
    statuses = {p.name: hostile_run.row(p.name)["status"] for p in tree}
    assert statuses == {p.name: "evaluated" for p in tree}


def test_attributes_of_a_patch_are_removed_and_its_edited_tests_restored(hostile_run: EvalRun) -> None:
    for variant, (folder, _) in ATTRIBUTES.items():
        result = hostile_run.result(f"gitattributes-{variant}")
        protection = result["protection"]
        assert result["patch"]["status"] == "applied", variant
        assert f"{folder}.gitattributes" in protection["hazards_removed"] + protection["untracked_paths_removed"]
        assert protection["restored_paths"] == ["tests/test_api.py" if folder else "tests/test_core.py"], variant
        assert result["tests_passed"] == 7, variant
    gitmodules = hostile_run.result("gitmodules-over-tests")["protection"]
    assert (gitmodules["hazards_removed"], gitmodules["restored_paths"]) == ([".gitmodules"], ["tests/test_core.py"])


def test_symlinks_with_names_git_quotes_are_refused(hostile_run: EvalRun) -> None:
    for variant, (name, _) in ODD_SYMLINKS.items():
        result = hostile_run.result(f"symlink-{variant}")
        assert result["outcome"] == "model_failure:patch_unsafe_paths", variant
        assert result["patch"]["unsafe_paths"] == [name.decode("utf-8", "backslashreplace")], variant


def test_deep_and_large_trees_are_prepared_and_judged(hostile_run: EvalRun) -> None:
    deep = hostile_run.result("deep-nesting-1100")
    assert deep["protection"]["hazards_removed"] == [deep_path(1100, "conftest.py")]
    assert deep["patch"]["changed_paths"] == [deep_path(1100, "leaf.txt")]
    assert hostile_run.result("files-60000")["patch"]["changed_count"] == MANY_FILES
    assert hostile_run.result("bytecode-30000")["protection"]["hazards_removed_count"] == MANY_BYTECODE
    for name, listed in (("files-60000", ("patch", "changed_paths")),
                         ("bytecode-30000", ("protection", "hazards_removed"))):
        assert len(hostile_run.result(name)[listed[0]][listed[1]]) == 200, name  # the rest in execution.json
        execution = json.loads((hostile_run.folder(name) / "execution.json").read_text())
        assert len(execution["preparation"][listed[1]]) == (MANY_FILES if name == "files-60000" else MANY_BYTECODE)
    for name in ("deep-nesting-1100", "files-60000", "bytecode-30000"):
        result = hostile_run.result(name)
        assert (result["patch"]["status"], result["tests_passed"]) == ("applied", 7), name


def test_tree_attacks_in_checkpoint_states_and_agents_patches_are_judged_alike(hostile_run: EvalRun) -> None:
    states = json.loads((hostile_run.folder("checkpoint-tree-attacks") / "states.json").read_text())
    first, second = (s["preparation"] for s in states)
    assert (first["hazards_removed"], first["restored_paths"]) == ([".gitattributes"], ["tests/test_core.py"])
    assert (second["patch_status"], second["unsafe_paths"]) == ("unsafe_paths", ["minicache/a\nb"])
    agents = hostile_run.result("agents-symlinked-modules")
    assert [m["merge_status"] for m in agents["integration"]["merges"]] == ["clean", "clean"]  # in scope
    assert agents["patch"]["unsafe_paths"] == ["minicache/api.py", "minicache/core.py"]
    out_of_scope = hostile_run.result("agents-gitattributes")["integration"]["merges"]
    assert [m["reason"] for m in out_of_scope] == ["scope_violation", "scope_violation"]


def test_exhausting_the_container_is_a_model_outcome_never_an_infrastructure_error(hostile_run: EvalRun) -> None:
    """The output folder, /dev/shm, the memory and the process limit exhausted after the report, during the tests and
    in the probes, in a final patch, a checkpoint state and an agent's patch: each is evaluated and scored (issue 27:
    filling the output folder once made the init's marker fail, then three attempts and an infrastructure error)."""
    for name in EXHAUST_PAYLOADS:
        assert hostile_run.row(name)["status"] == "evaluated", (name, hostile_run.row(name).get("infrastructure_error"))
    for name in ("exhaust-output-after-the-report", "exhaust-small-mounts-after-the-report"):
        result = hostile_run.result(name)  # the fill came after the report: it is scored as pytest wrote it
        assert (result["tests_passed"], result["integrity"]["report_problem"]) == (7, None), name
        output = (hostile_run.folder(name) / "evaluator_output.txt").read_text(errors="replace")
        assert "EXHAUSTED inodes /asyncodebench/out" in output, name
    probes_only = hostile_run.row("exhaust-output-and-pids-in-the-probes")
    base = hostile_run.row("honest-base")
    assert (probes_only["tests_passed"], probes_only["adpr"]) == (7, base["adpr"])
# --- decision 14: collected tests by identity (tests/helpers/payloads/identity.py) ---------------------------------

from helpers.payloads.identity import BASE_FAILING, IDENTITY_PAYLOADS  # noqa: E402  (appended section)

DEMO_PASSING_AT_BASE = 7


def test_tests_swapped_renamed_reparametrized_or_dropped_score_as_if_they_failed(hostile_run: EvalRun) -> None:
    """Each payload keeps the count (25 collected, all passed, exit 0: the count rules pass) while the base's
    failing tests are gone under their own ids; each scores exactly what the base state scores with every base test
    it no longer lists counted as failed (the dropped file takes its one passing test with it). Another layer may
    also call the run tampering, which scores 0: never more."""
    base = hostile_run.result("honest-base")
    for name in IDENTITY_PAYLOADS:
        result = hostile_run.result(name)
        assert result["final_success"] is False and result["adpr"] == base["adpr"] == 0.0, name
        if result["integrity"]["violation"] == "integrity_tampering":
            assert result["tests_passed"] == 0, name
            continue
        identity = result["integrity"]["collected_by_identity"]
        assert identity["checked"] is True and identity["added_count"] > 0, name
        missing = set(identity["missing"])
        assert identity["missing_count"] == len(missing) and missing >= set(BASE_FAILING), name
        lost_passing = len(missing - set(BASE_FAILING))  # base-passing tests it dropped: failed too
        assert (result["tests_passed"], result["tests_denominator"]) == (DEMO_PASSING_AT_BASE - lost_passing, 25), name
        assert result["outcome"] == "model_failure:integrity_collection_shrunk", name
        if name.startswith("identity-"):  # the final state itself carries the edit: pytest was fooled
            summary = result["evaluator"]["summary"]
            assert (result["evaluator"]["exit_code"], summary["passed"], summary["total"]) == (0, 25, 25), name
    for honest in ("honest-base", "honest-gold"):
        identity = hostile_run.result(honest)["integrity"]["collected_by_identity"]
        assert identity == {"checked": True, "missing_count": 0, "missing": [], "added_count": 0}, honest


def test_a_reparametrized_test_never_passes_the_probe_that_names_it(hostile_run: EvalRun) -> None:
    """`test_memoize_reuses_result` becomes `test_memoize_reuses_result[edited]`, which passes and which the
    `[param]` matching rule alone would take for the selector; scored on the ids the base collected for it, the
    selector is not passed, in the final state and in a checkpoint state."""
    record = json.loads((hostile_run.run_dir / DEMO_BASELINE).read_text())
    assert record["selector_ids"]["tests/test_api.py::test_memoize_reuses_result"] == [
        "tests/test_api.py::test_memoize_reuses_result"]
    assert len(record["collected_ids"]) == 25
    for name in ("identity-reparametrize-failing-tests", "checkpoint-identity-reparametrize"):
        lines = (hostile_run.folder(name) / "dependency_probe_checkpoints.jsonl").read_text().splitlines()
        first = json.loads(lines[0])["probe_test_results"]["tests/test_api.py::test_memoize_reuses_result"]
        assert first["passed"] is False, (name, first)
        assert "tests/test_api.py::test_memoize_reuses_result[edited]" not in {
            n["nodeid"] for n in first["matched_nodeids"]}, name
