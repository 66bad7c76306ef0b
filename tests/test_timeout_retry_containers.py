"""A timeout under load is retried, on real containers (METRICS decision 16): a native build and an evaluator whose
first run is held past its limit finish in the second, with twice the limit, and score as gold; one that never ends
times out in both and is scored as before, both runs recorded.

What holds the first run back is the harness's own argument, not timing: the evaluated code reads the limit that
`timeout` (root's, the sandbox user can see its command line in /proc) was given, and sleeps when it is the first
run's. That the code can tell its runs apart gains it nothing: only the last run counts, and it gets there only by
behaving as it would have on the first.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Any

import pytest

from asyncodebench.dataset.rows import load_published
from asyncodebench.harness.evaluation import Settings, evaluate_patch, new_run_id
from asyncodebench.harness.sandbox import docker_client, remove_run_containers
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.demo import MINICACHE, NATIVE_DEMO
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score

pytestmark = pytest.mark.docker

FIRST_LIMIT = 30  # seconds: the second run gets 60, room for an honest run beside a loaded machine
NEVER_ENDS_LIMIT = 3
# The build's parent is `timeout -k 10 <limit> ...`: sleep through the first run's limit, build in the second.
BUILD_HELD_IN_ITS_FIRST_RUN = (
    "sh", "-c", f'set -- $(tr "\\0" " " < /proc/$PPID/cmdline); [ "$4" = "{FIRST_LIMIT}" ] && exec sleep 100000; '
    "exec cmake --build build --parallel")
# The same for code the tests import: walk up to `timeout` and read its limit.
HELD_IN_ITS_FIRST_RUN = '''
import os as _os
import time as _time


def _harness_limit():
    pid = _os.getpid()
    while pid > 1:
        with open("/proc/%d/stat" % pid) as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = handle.read().split(b"\\0")
        if _os.path.basename(argv[0]) == b"timeout":
            return int(argv[3])
    return None


if HOLD:
    _time.sleep(100000)
'''


def _spec(dataset: Any) -> TaskSpec:
    rows = load_published(str(dataset.path)).rows
    return TaskSpec.from_rows(rows.tasks[0], rows.dependencies)


def _run(spec: TaskSpec, patch: bytes, settings: Settings) -> Any:
    client, run_id = docker_client(), new_run_id()
    try:
        evidence = evaluate_patch(client, spec, patch, run_id, settings, {})
    finally:
        remove_run_containers(client, run_id)
    result = score(spec, Prediction(1, spec.task_id, "single", "m", None, patch.decode(), (), {}, {}), evidence,
                   probes_ran=False)
    assert result.evaluation is not None
    return evidence, result.evaluation


def test_a_build_held_past_its_limit_in_its_first_run_is_built_again_and_counts(native_demo_dataset: Any) -> None:
    spec = _spec(native_demo_dataset)
    assert spec.build is not None
    held = replace(spec, build=replace(spec.build, command=BUILD_HELD_IN_ITS_FIRST_RUN))
    gold = (NATIVE_DEMO.folder / "patches" / "gold.patch").read_bytes()
    evidence, evaluation = _run(held, gold, Settings(timeout=60, run_probes=False, build_timeout=FIRST_LIMIT))
    assert evidence.build is not None and evidence.build.succeeded
    assert (evidence.build.attempts, evidence.build.limits) == (2, (FIRST_LIMIT, 2 * FIRST_LIMIT))
    assert "Building CXX object" in evidence.build.output_tail  # the second run built the gold's sources
    final = evaluation.build.final
    assert (final["status"], final["attempts"], final["limits_seconds"]) == ("built", 2, [30, 60])
    assert evaluation.score.outcome == "passed" and evaluation.score.tests_passed == 48  # the gold's verdict


def test_a_build_that_never_ends_times_out_in_both_runs_and_is_build_failed(native_demo_dataset: Any) -> None:
    spec = _spec(native_demo_dataset)
    assert spec.build is not None
    forever = replace(spec, build=replace(spec.build, command=("sleep", "100000")))
    gold = (NATIVE_DEMO.folder / "patches" / "gold.patch").read_bytes()
    evidence, evaluation = _run(forever, gold, Settings(timeout=60, run_probes=False,
                                                        build_timeout=NEVER_ENDS_LIMIT))
    assert evidence.build is not None and evidence.build.status == "timed_out"
    assert (evidence.build.attempts, evidence.build.limits) == (2, (NEVER_ENDS_LIMIT, 2 * NEVER_ENDS_LIMIT))
    assert evidence.build.seconds >= 2 * NEVER_ENDS_LIMIT  # the second run had its doubled limit
    assert evaluation.score.outcome == "model_failure:build_failed" and evaluation.score.pass_rate == 0.0
    assert evaluation.build.final["attempts"] == 2


def _gold_with_package_code(hold: str) -> bytes:
    """The minicache gold patch, plus code in the package's __init__ (imported by every test) that sleeps when
    `hold` (a Python expression over `_harness_limit()`) is true."""
    path = "minicache/__init__.py"
    before = (MINICACHE.folder / "repo" / path).read_text().splitlines(keepends=True)
    after = before + HELD_IN_ITS_FIRST_RUN.replace("HOLD", hold).splitlines(keepends=True)
    hunk = "".join(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
    gold = (MINICACHE.folder / "patches" / "gold.patch").read_text()
    return (gold + f"diff --git a/{path} b/{path}\n" + hunk).encode()


def test_an_evaluator_held_past_its_limit_in_its_first_run_runs_again_and_counts(demo_dataset: Any) -> None:
    spec = _spec(demo_dataset)
    patch = _gold_with_package_code(f"_harness_limit() == {FIRST_LIMIT}")
    evidence, evaluation = _run(spec, patch, Settings(timeout=FIRST_LIMIT, run_probes=False))
    assert evidence.preparation.patch_status == "applied", evidence.preparation.patch_log
    assert (evidence.attempts, evidence.limits, evidence.timed_out) == (2, (FIRST_LIMIT, 2 * FIRST_LIMIT), False)
    assert (evaluation.evaluator.attempts, evaluation.evaluator.limits_seconds) == (2, (30, 60))
    assert evaluation.score.outcome == "passed" and evaluation.score.final_success is True  # the gold's verdict
    assert evaluation.integrity.tampering == ()


def test_an_evaluator_that_never_ends_times_out_in_both_runs_and_scores_as_a_timeout(demo_dataset: Any) -> None:
    spec = _spec(demo_dataset)
    patch = _gold_with_package_code("True")
    evidence, evaluation = _run(spec, patch, Settings(timeout=NEVER_ENDS_LIMIT, run_probes=False))
    assert (evidence.attempts, evidence.limits) == (2, (NEVER_ENDS_LIMIT, 2 * NEVER_ENDS_LIMIT))
    assert evidence.timed_out is True and evidence.exit_code == 124 and evidence.killed_by_watchdog is False
    assert evaluation.score.outcome == "model_failure:timeout" and evaluation.score.pass_rate == 0.0
    assert evaluation.evaluator.timed_out is True and evaluation.evaluator.limits_seconds == (3, 6)
