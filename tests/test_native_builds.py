"""Native code rebuilt before evaluation (METRICS decision 13), without containers: the build table, the task specs
that carry it, and how a build's outcome is scored and saved. The real builds are in `test_native_demo_run.py`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from helpers.checkout import ROOT

from asyncodebench.dataset.native_builds import NativeBuildError, native_builds
from asyncodebench.dataset.validation import validator
from asyncodebench.harness.evaluation import Evidence, Settings, StateEvidence, evidence_from
from asyncodebench.harness.native import BuildRun
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.harness.workspace import Preparation
from asyncodebench.run.prediction_result import PredictionResult
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score
from asyncodebench.run.store import load_evidence, save_evidence

TVM_TASKS = ("asyncodebench:apache-tvm-20018", "asyncodebench:apache-tvm-20073", "asyncodebench:apache-tvm-20107",
             "asyncodebench:apache-tvm-20153")
# upstream pr_hard_tvm.v0.4.json, common.rebuild_before_evaluation
UPSTREAM_REBUILD = ("cmake", "--build", "build", "--parallel")


def test_every_tvm_task_rebuilds_as_upstream_s_environment_says() -> None:
    builds = native_builds()
    for task_id in TVM_TASKS:
        build = builds[task_id]
        assert build.command == UPSTREAM_REBUILD and build.build_dir == "build"
        assert "pr_hard_tvm.v0.4.json" in build.source and "82f9cdb0" in build.source
    tasks = {yaml.safe_load(p.read_text())["task_id"] for p in (ROOT / "data" / "tasks").glob("*.yaml")
             if not p.name.endswith((".audit.yaml", ".image.yaml"))}
    assert {t for t in builds if not t.startswith("asyncodebench-demo:")} == set(TVM_TASKS)
    assert set(TVM_TASKS) <= tasks


@pytest.mark.parametrize("entry", [{"command": ["make"], "build_dir": "out/build", "timeout_seconds": 5, "source": "x"},
                                   {"command": [], "build_dir": "build", "timeout_seconds": 5, "source": "x"},
                                   {"command": ["make"], "build_dir": ".git", "timeout_seconds": 5, "source": "x"},
                                   {"command": ["make"], "build_dir": "build", "source": "x"}],
                         ids=["nested-folder", "no-command", "git-folder", "no-timeout"])
def test_a_malformed_build_entry_is_refused_with_its_task(tmp_path: Path, entry: dict) -> None:
    table = tmp_path / "native_builds.yaml"
    table.write_text(yaml.safe_dump({"asyncodebench:x": entry}))
    with pytest.raises(NativeBuildError, match="asyncodebench:x"):
        native_builds(table)


def test_a_task_spec_carries_its_build_and_a_python_task_none(offline_demo_dataset: Path) -> None:
    from asyncodebench.dataset.rows import load_published

    rows = load_published(str(offline_demo_dataset)).rows
    spec = TaskSpec.from_rows(rows.tasks[0], rows.dependencies)
    assert spec.build is None
    renamed = TaskSpec.from_rows({**rows.tasks[0], "task_id": TVM_TASKS[1]}, rows.dependencies)
    assert renamed.build is not None and renamed.build.command == UPSTREAM_REBUILD


def _spec(offline_demo_dataset: Path) -> TaskSpec:
    from asyncodebench.dataset.rows import load_published

    rows = load_published(str(offline_demo_dataset)).rows
    spec = TaskSpec.from_rows(rows.tasks[0], rows.dependencies)
    return replace(spec, build=native_builds()["asyncodebench-demo:vecstats"])


def _applied(spec: TaskSpec) -> Preparation:
    return Preparation("applied", "", (), spec.base_revision, (), (), (), ("src/x.cpp",), ())


FAILED = BuildRun(UPSTREAM_REBUILD, 1, 2.5, False, "src/x.cpp:3: error: expected ';'")
TIMED_OUT = BuildRun(UPSTREAM_REBUILD, 124, 30.2, True, "")
BUILT = BuildRun(UPSTREAM_REBUILD, 0, 1.25, False, "ninja: no work to do.")


@pytest.mark.parametrize("run", [FAILED, TIMED_OUT], ids=["failed", "timed-out"])
def test_a_build_that_fails_is_a_model_outcome_scored_zero(offline_demo_dataset: Path, run: BuildRun) -> None:
    spec = _spec(offline_demo_dataset)
    evidence = replace(evidence_from(spec, _applied(spec), None, None, Settings()), build=run,
                       states=(StateEvidence("agent_artifact", "agent_workspace", "a", _applied(spec), None, BUILT),))
    result = score(spec, Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {}), evidence)
    assert result.evaluation is not None
    graded, build = result.evaluation.score, result.evaluation.build
    assert graded.outcome == "model_failure:build_failed" and graded.final_success is False
    assert (graded.pass_rate, graded.tests_passed, graded.tests_denominator) == (0.0, 0, spec.expected_total)
    assert graded.denominator_source == "expected_total_due_build_failure"
    assert build is not None and build.final is not None and build.final["status"] == run.status
    assert [(s["step"], s["status"]) for s in build.states] == [(1, "built"), (2, run.status)]
    assert build.seconds == round(BUILT.seconds + run.seconds, 3)
    final = result.checkpoints[-1]
    assert final["source_build"]["status"] == run.status and final["source_build"]["output_tail"] == run.output_tail
    assert all(not r["passed"] for r in final["probe_test_results"].values())  # probes never ran: not passed
    assert result.checkpoints[0]["source_build"]["status"] == "built"
    record = result.to_json()
    assert not list(validator("result").iter_errors(record))
    assert PredictionResult.from_json(record, result.checkpoints) == result


def test_a_patch_that_never_applied_stays_a_patch_failure_with_nothing_built(offline_demo_dataset: Path) -> None:
    spec = _spec(offline_demo_dataset)
    failed = Preparation("failed", "error: patch does not apply", (), spec.base_revision, (), (), (), (), ())
    result = score(spec, Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {}),
                   evidence_from(spec, failed, None, None, Settings()))
    assert result.evaluation is not None and result.evaluation.score.outcome == "model_failure:patch_did_not_apply"
    assert result.evaluation.build is not None and result.evaluation.build.to_json()["states_built"] == 0


def test_builds_are_saved_with_the_evidence_and_rescored_the_same(offline_demo_dataset: Path, tmp_path: Path) -> None:
    spec = _spec(offline_demo_dataset)
    state = StateEvidence("agent_artifact", "agent_workspace", "a", _applied(spec), None, BUILT)
    evidence: Evidence = replace(evidence_from(spec, _applied(spec), None, None, Settings()), build=FAILED,
                                 states=(state,))
    save_evidence(tmp_path, evidence)
    assert json.loads((tmp_path / "execution.json").read_text())["build"]["exit_code"] == 1
    loaded = load_evidence(tmp_path)
    assert loaded.build == FAILED and loaded.states[0].build == BUILT
    prediction = Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {})
    assert score(spec, prediction, loaded, recorded_at="t") == score(spec, prediction, evidence, recorded_at="t")
