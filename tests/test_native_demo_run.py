"""The native demo task (vecstats: C++ built by CMake + Ninja, loaded by Python) through the whole kit, as users run
it: every state is built once before its tests (METRICS decision 13), gold passes only with its build, what does not
build is a model outcome, hostile builds are contained, and checkpoints and agent integration work on it.

One evaluate.py run of every example prediction of the task serves most tests (`native_demo_run`, in conftest.py);
the build's absence is shown with the harness itself on the same image.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.demo_run import NATIVE_RUN_BUILD_SECONDS, EvalRun

from asyncodebench.dataset.native_builds import native_builds
from asyncodebench.dataset.rows import load_published
from asyncodebench.harness.build_tree import NoBuildTreeError
from asyncodebench.harness.evaluation import Settings, Workbench, evaluate_patch, new_run_id
from asyncodebench.harness.sandbox import LABEL_RUN, docker_client, remove_run_containers
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.demo import NATIVE_DEMO
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score
from asyncodebench.run.runfolder import prediction_folders
from asyncodebench.run.work import measure_baseline

pytestmark = pytest.mark.docker

GOLD_TOTAL, BASE_PASSED = 48, 14  # data/demo-native/task.yaml: demo_gold_sanity and demo_base
HOSTILE = ("demo-native-build-writes-outside", "demo-native-build-network", "demo-native-build-fork-bomb",
           "demo-native-build-fills-disk", "demo-native-build-runs-forever")


def _results(run: EvalRun) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every prediction's result and checkpoint records, from its folder."""
    found = []
    for folder in prediction_folders(run.run_dir):
        checkpoints = folder / "dependency_probe_checkpoints.jsonl"
        records = [json.loads(line) for line in checkpoints.read_text().splitlines()] if checkpoints.exists() else []
        found.append((json.loads((folder / "result.json").read_text()), records))
    return found


def _result(run: EvalRun, model: str, protocol: str = "single") -> dict[str, Any]:
    (result,) = [r for r, _ in _results(run) if r["model_name_or_path"] == model and r["protocol"] == protocol]
    return result


def test_every_line_is_evaluated_and_nothing_is_left_behind(native_demo_run: EvalRun) -> None:
    run = native_demo_run
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(run.report["predictions"]) == len(run.extra["lines"])
    assert {p["status"] for p in run.report["predictions"]} == {"evaluated"}
    assert run.extra["containers_left"] == []
    volumes = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"label={LABEL_RUN}"], capture_output=True,
                             text=True, check=True).stdout.split()
    labels = [subprocess.run(["docker", "volume", "inspect", "-f", f'{{{{index .Labels "{LABEL_RUN}"}}}}', v],
                             capture_output=True, text=True).stdout.strip() for v in volumes]
    assert not [label for label in labels if label.startswith(run.extra["run_id"])]  # base, overlay, upper volumes
    baseline = run.report["run"]["baselines"][NATIVE_DEMO_TASK]
    assert baseline["matches_recorded"] is True and baseline["counts"]["passed"] == BASE_PASSED  # built at base too


NATIVE_DEMO_TASK = "asyncodebench-demo:vecstats"


def test_gold_passes_with_its_build(native_demo_run: EvalRun) -> None:
    gold = _result(native_demo_run, "demo-native-gold")
    assert gold["outcome"] == "passed" and (gold["tests_passed"], gold["tests_denominator"]) == (GOLD_TOTAL,) * 2
    assert gold["build"]["final"]["status"] == "built" and gold["build"]["final"]["exit_code"] == 0
    assert gold["build"]["command"] == ["cmake", "--build", "build", "--parallel"]
    assert "Building CXX object" in gold["build"]["final"]["output_tail"]  # incremental: the changed sources only
    assert gold["adpr"] == 1.0


def test_gold_without_the_build_step_fails(native_demo_dataset: Any) -> None:
    """The same patch on the same image by the same harness, the image's build tree in place, but the build command
    replaced by one that does nothing: the tests meet the base's library."""
    rows = load_published(str(native_demo_dataset.path)).rows
    spec = TaskSpec.from_rows(rows.tasks[0], rows.dependencies)
    assert spec.build is not None
    unbuilt = replace(spec, build=replace(spec.build, command=("true",)))
    gold = (NATIVE_DEMO.folder / "patches" / "gold.patch").read_bytes()
    client, run_id = docker_client(), new_run_id()
    try:
        evidence = evaluate_patch(client, unbuilt, gold, run_id, Settings(timeout=60, run_probes=False), {})
    finally:
        remove_run_containers(client, run_id)
    result = score(unbuilt, Prediction(1, spec.task_id, "single", "gold-unbuilt", None, gold.decode(), (), {}, {}),
                   evidence, probes_ran=False)
    assert result.evaluation is not None and result.evaluation.build is not None
    assert result.evaluation.build.final is not None and result.evaluation.build.final["status"] == "built"
    graded = result.evaluation.score
    assert graded.outcome == "failed" and graded.tests_passed == BASE_PASSED  # the new C symbols are not in the .so
    assert "undefined symbol: vs_variance" in evidence.output


def test_a_patch_that_does_not_compile_is_build_failed(native_demo_run: EvalRun) -> None:
    result = _result(native_demo_run, "demo-native-no-compile")
    assert result["outcome"] == "model_failure:build_failed" and result["final_success"] is False
    assert (result["pass_rate"], result["tests_passed"], result["tests_denominator"]) == (0.0, 0, GOLD_TOTAL)
    assert result["denominator_source"] == "expected_total_due_build_failure"
    final = result["build"]["final"]
    assert final["status"] == "failed" and final["exit_code"] != 0 and "error" in final["output_tail"]
    assert set(result["probes"]["statuses"].values()) == {"not_collected"}  # no probe ran on an unbuilt state
    row = native_demo_run.row("demo-native-no-compile")
    assert row["build"]["final"]["status"] == "failed"


@pytest.mark.parametrize("model", HOSTILE)
def test_a_misbehaving_build_is_contained_and_scored_as_a_model_outcome(native_demo_run: EvalRun, model: str) -> None:
    """Each is gold plus a build that writes outside the tree, needs the network, forks without end, fills its disk
    or never ends: only the misbehaviour could let it score, and it ends as a failed build."""
    result = _result(native_demo_run, model)
    assert result["status"] == "evaluated"
    assert result["outcome"] == "model_failure:build_failed" and result["pass_rate"] == 0.0
    final = result["build"]["final"]
    if model in ("demo-native-build-fork-bomb", "demo-native-build-runs-forever"):
        assert final["status"] == "timed_out" and final["seconds"] >= NATIVE_RUN_BUILD_SECONDS
    else:
        assert final["status"] == "failed"


def test_what_a_build_writes_in_the_tree_never_reaches_the_tests(native_demo_run: EvalRun) -> None:
    """The build succeeds and plants a conftest that passes every test in tests/, at the root and in the build tree;
    the state's tests run in their own prepared tree, so it scores what its (empty) solution scores."""
    result = _result(native_demo_run, "demo-native-build-plants-conftest")
    assert result["build"]["final"]["status"] == "built"
    assert result["outcome"] == "failed" and result["tests_passed"] == BASE_PASSED


def test_native_code_that_forges_the_reports_is_caught_by_the_sentinels(native_demo_run: EvalRun) -> None:
    """The integrity work holds for code the build produced: a shared object whose constructor runs Python in the
    test process (through the interpreter's C API) and makes every report say passed is tampering, scored 0."""
    result = _result(native_demo_run, "demo-native-forges-reports")
    assert result["build"]["final"]["status"] == "built"
    assert result["outcome"] == "model_failure:integrity_tampering" and result["pass_rate"] == 0.0
    assert any("sentinel that must be failed is passed" in t["reason"] for t in result["integrity"]["tampering"])


def test_every_evaluated_state_is_built_exactly_once(native_demo_run: EvalRun) -> None:
    checked = 0
    for result, checkpoints in _results(native_demo_run):
        if result["patch"]["status"] not in ("applied", "applied_with_fuzz", "empty"):
            continue
        build = result["build"]
        assert build["states_built"] == len(checkpoints) == result["run_metrics"]["checkpoint_count"], result
        assert [s["step"] for s in build["states"]] == [c["logical_step"] for c in checkpoints]
        assert [c["source_build"]["status"] for c in checkpoints] == [s["status"] for s in build["states"]]
        checked += 1
    assert checked == len(native_demo_run.extra["lines"])


def test_a_checkpoint_that_does_not_build_probes_nothing_and_the_final_state_still_counts(
        native_demo_run: EvalRun) -> None:
    (result, checkpoints), = [(r, c) for r, c in _results(native_demo_run)
                              if r["model_name_or_path"] == "demo-native-replay-fixed-build"]
    statuses = [c["source_build"]["status"] for c in checkpoints]
    assert statuses[0] == "failed" and statuses[-1] == "built"
    for record in checkpoints:
        if record["source_build"]["status"] != "built":
            assert {r["status"] for r in record["probe_test_results"].values()} == {"not_collected"}
    assert result["outcome"] == "passed" and result["adpr"] == 1.0


@pytest.mark.parametrize("protocol", ["serial_specialists", "async_private"])
def test_agent_patches_are_integrated_and_each_state_built(native_demo_run: EvalRun, protocol: str) -> None:
    result = _result(native_demo_run, "demo-native-multi-clean", protocol)
    assert result["integration"]["agents"] == 2 and result["integration"]["merge_conflicts"] == 0
    assert result["outcome"] == "passed" and result["build"]["states_built"] == 5  # 2 agents x 2 + final
    assert {s["status"] for s in result["build"]["states"]} == {"built"}


def test_the_reports_show_each_state_s_build_time(native_demo_run: EvalRun) -> None:
    markdown = (native_demo_run.run_dir / "report.md").read_text()
    assert "## Native builds" in markdown
    gold_line = next(line for line in markdown.splitlines() if line.startswith("| ") and "demo-native-gold |" in line
                     and "| built |" in line)
    assert "1: " in gold_line
    html = (native_demo_run.run_dir / "report.html").read_text()
    assert "native build failed" in html  # the no_compile row's flag


def test_the_demo_run_script_includes_the_native_task() -> None:
    script = (Path(__file__).resolve().parents[1] / "scripts" / "run_demo.sh").read_text()
    assert "data/demo-native/predictions" in script


def test_an_image_without_a_build_tree_is_an_infrastructure_error_naming_it(demo_spec: TaskSpec) -> None:
    """A TVM row's build step on an image whose work tree has no build tree (the minicache demo image stands in):
    never graded without its build; the base state cannot be measured, so every prediction of the task is an
    infrastructure error (baseline_unavailable) that says why."""
    spec = replace(demo_spec, build=native_builds()["asyncodebench:apache-tvm-20073"])
    client, run_id = docker_client(), new_run_id()
    try:
        with pytest.raises(NoBuildTreeError, match=r"has no build tree at /testbed/build: .*cmake --build build"):
            Workbench.open(client, spec, run_id, Settings(), {})
        why = measure_baseline(client, spec, run_id, Settings(), {})
        assert isinstance(why, str) and "has no build tree at /testbed/build" in why
    finally:
        remove_run_containers(client, run_id)
