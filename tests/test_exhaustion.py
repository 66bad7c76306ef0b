"""A prediction cannot make itself an infrastructure error by exhausting its container (issue 27, 1a).

Every mount the evaluated code may write (work tree, /tmp, the output folder, /dev/shm), its inodes, the process
limit and the container's memory, exhausted after pytest wrote its report and while the tests are collected, in the
evaluator and in every probe process, on the minicache demo under small limits (so each fill takes a moment); and the
same during and after the native build of the vecstats demo. The harness's own records and the init's marker live
where the evaluated code can neither write nor fill, so none of it raises a daemon failure: each ends as a scored
model outcome, and what pytest reported before the fill is scored as it is.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers.payloads.exhaust import IN_EVALUATOR, IN_PROBES, WRITABLE, exhaust_code
from helpers.payloads.hostile import CORE, PatchMaker, _appended

from asyncodebench.dataset.rows import load_published
from asyncodebench.harness.evaluation import Evidence, Settings, evaluate_patch, new_run_id
from asyncodebench.harness.probes import selector_results
from asyncodebench.harness.sandbox import Limits, docker_client, remove_run_containers
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.demo import NATIVE_DEMO
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score

pytestmark = pytest.mark.docker

# The mounts are small (a fill takes a moment) and smaller together than the memory, so that filling one of them
# is that mount's exhaustion; the memory case writes a work tree larger than the memory. The time limits are long:
# a fill after the report runs inside the command's time (a loaded machine is slow to fill), and a probe that ran
# out of time would not be the state's own status.
LIMITS = Limits(memory="512m", pids=64, workspace="128m", tmp="64m", io="16m", inodes=20_000)
MEMORY_LIMITS = replace(LIMITS, memory="192m", workspace="1g")
SETTINGS = Settings(timeout=300, probe_timeout=300, limits=LIMITS)
# Every mount the evaluated code may write, space then inodes (/dev/shm's inodes are bounded by memory alone), then
# the process limit, one after the other in one process.
EVERY_MOUNT = [(WRITABLE[mount], kind) for mount in ("work tree", "tmp", "output") for kind in ("space", "inodes")]
EVERY_MOUNT += [(WRITABLE["shm"], "space"), ("", "pids")]
BASE_PASSED = 7  # data/demo/task.yaml: what the base state scores


class Harness:
    """Evaluates patches of one task as the kit does (evaluator, probes, each state built first), and scores them."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec, self.client, self.run_id = spec, docker_client(), new_run_id()

    def evaluate(self, patch: str, settings: Settings = SETTINGS) -> tuple[Evidence, Any]:
        """The evidence and the scored result; a daemon failure (an infrastructure error) raises."""
        evidence = evaluate_patch(self.client, self.spec, patch.encode(), self.run_id, settings, {})
        line = Prediction(1, self.spec.task_id, "single", "exhaust", None, patch, (), {}, {})
        return evidence, score(self.spec, line, evidence, probes_ran=settings.run_probes)

    def close(self) -> None:
        remove_run_containers(self.client, self.run_id)


@pytest.fixture(scope="module")
def minicache(demo_spec: TaskSpec) -> Iterator[Harness]:
    harness = Harness(demo_spec)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture(scope="module")
def maker() -> Iterator[PatchMaker]:
    made = PatchMaker()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def base_statuses(minicache: Harness) -> dict[str, str]:
    """Each probe selector's status in the base state, under the same limits."""
    evidence, result = minicache.evaluate("")
    assert result.evaluation.score.tests_passed == BASE_PASSED
    return _statuses(minicache.spec, evidence)


def _statuses(spec: TaskSpec, evidence: Evidence) -> dict[str, str]:
    return {s: r.status for s, r in selector_results(evidence.probes, spec.selectors).items()}


def test_every_mount_exhausted_after_the_report_leaves_the_report_scored_as_pytest_wrote_it(
        minicache: Harness, maker: PatchMaker, base_statuses: dict[str, str]) -> None:
    """In the evaluator and in every probe process, after the report: nothing the trusted side reads afterwards
    shares what was filled, so the report and the probes score exactly what the base state does."""
    evidence, result = minicache.evaluate(maker.diff(_appended(CORE, exhaust_code(EVERY_MOUNT, True))))
    assert result.status == "evaluated"
    for folder, kind in EVERY_MOUNT[:-1]:  # the fork bomb holds no output
        assert f"EXHAUSTED {kind} {folder} " in evidence.output, (folder, kind, evidence.output[-2000:])
    assert evidence.report_problem is None and result.evaluation.score.tests_passed == BASE_PASSED
    assert not result.evaluation.integrity.tampering
    assert _statuses(minicache.spec, evidence) == base_statuses


def test_every_mount_exhausted_while_the_tests_are_collected_is_a_model_outcome(
        minicache: Harness, maker: PatchMaker) -> None:
    """At import: in the evaluator every mount (the full output folder leaves no room for its report: missing,
    scored 0), in every probe process every mount but the output folder (a probe process without a report would be
    run again per selector, 15 more containers, each filling as much)."""
    probes = [(folder, kind) for folder, kind in EVERY_MOUNT if folder != WRITABLE["output"]]
    code = exhaust_code(EVERY_MOUNT, False, IN_EVALUATOR) + exhaust_code(probes, False, IN_PROBES)
    evidence, result = minicache.evaluate(maker.diff(_appended(CORE, code)))
    assert result.status == "evaluated"
    # pytest holds back what the tests print while they are collected; the missing report shows the folder was full
    assert evidence.report_problem == "missing" and result.evaluation.score.tests_passed == 0
    assert evidence.probes is not None and evidence.probes.mode == "batch"  # its report was written, and read


@pytest.mark.parametrize("after_report", [True, False])
def test_memory_exhausted_is_a_model_outcome(minicache: Harness, maker: PatchMaker, after_report: bool) -> None:
    """A work tree written past the memory limit (its tmpfs is counted there): the kernel's OOM killer ends the
    container's processes; the report is scored as pytest wrote it, or missing (0) when the killer took the
    container's init, and with it its files. Never a daemon failure."""
    patch = maker.diff(_appended(CORE, exhaust_code([("", "memory")], after_report)))
    evidence, result = minicache.evaluate(patch, replace(SETTINGS, limits=MEMORY_LIMITS))
    assert result.status == "evaluated"
    assert result.evaluation.score.tests_passed <= BASE_PASSED and not result.evaluation.score.final_success
    if evidence.report_problem is None:
        assert "EXHAUSTED space /testbed" in evidence.output or evidence.exit_code == 137


# --- the native build: vecstats ----------------------------------------------------------------------------------

NATIVE_GOLD_TOTAL = 48
BUILD_HOOK = '''diff --git a/CMakeLists.txt b/CMakeLists.txt
--- a/CMakeLists.txt
+++ b/CMakeLists.txt
@@ -19,3 +19,9 @@ set_target_properties(vecstats PROPERTIES
     VISIBILITY_INLINES_HIDDEN ON
     LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
 )
+
+find_program(PYTHON3 python3 REQUIRED)
+add_custom_command(TARGET vecstats WHEN
+    COMMAND ${PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/exhaust.py
+    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
+    VERBATIM)
'''


def native_patch(targets: list[tuple[str, str]], after_link: bool) -> str:
    """The gold patch plus a build step that exhausts each (folder, kind): after the library is linked (the build
    then succeeds, its tree full) or before it is (Ninja runs PRE_BUILD steps just before the link)."""
    lines = exhaust_code(targets, False).splitlines()
    new_file = (f"diff --git a/cmake/exhaust.py b/cmake/exhaust.py\nnew file mode 100644\n--- /dev/null\n"
                f"+++ b/cmake/exhaust.py\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))
    gold = (NATIVE_DEMO.folder / "patches" / "gold.patch").read_text()
    return BUILD_HOOK.replace("WHEN", "POST_BUILD" if after_link else "PRE_BUILD") + new_file + gold


@pytest.fixture(scope="module")
def vecstats(native_demo_dataset: Any) -> Iterator[Harness]:
    rows = load_published(str(Path(native_demo_dataset.path))).rows
    harness = Harness(TaskSpec.from_rows(rows.tasks[0], rows.dependencies))
    try:
        yield harness
    finally:
        harness.close()


# Probes off: the build is what these exhaust (the state's pytest processes are the minicache cases' business). The
# memory holds every mount full at once beside the build's own processes.
NATIVE_SETTINGS = Settings(timeout=600, probe_timeout=60, run_probes=False,
                           limits=replace(LIMITS, memory="1g", workspace="256m", build_space="64m"), build_timeout=600)
BUILD_TREE = "/testbed/build"


def test_a_build_that_exhausts_every_mount_after_linking_is_built_and_scored(vecstats: Harness) -> None:
    """Its build tree, the work tree, /tmp and /dev/shm full (and the inodes of the two with an inode limit),
    processes holding the process limit left behind: the build succeeded, its processes are ended, and the state's
    tests score the gold library."""
    targets = [(BUILD_TREE, "space"), (WRITABLE["work tree"], "space"), (WRITABLE["work tree"], "inodes"),
               (WRITABLE["tmp"], "space"), (WRITABLE["tmp"], "inodes"), (WRITABLE["shm"], "space"), ("", "pids")]
    evidence, result = vecstats.evaluate(native_patch(targets, True), NATIVE_SETTINGS)
    assert result.status == "evaluated"
    assert evidence.build is not None and evidence.build.status == "built", evidence.build
    for folder, kind in targets[:-1]:
        assert f"EXHAUSTED {kind} {folder} " in evidence.build.output_tail, (folder, kind, evidence.build.output_tail)
    graded = result.evaluation.score
    assert graded.outcome == "passed" and graded.tests_passed == NATIVE_GOLD_TOTAL


def test_a_build_that_exhausts_its_tree_and_memory_before_linking_is_build_failed(vecstats: Harness) -> None:
    """The build tree full, then a work tree written past the memory limit (the OOM killer ends the build's
    processes, perhaps the container's init too), before the link: a failed build, a model outcome scored 0."""
    settings = replace(NATIVE_SETTINGS, limits=replace(NATIVE_SETTINGS.limits, memory="192m", workspace="1g"))
    evidence, result = vecstats.evaluate(native_patch([(BUILD_TREE, "space"), ("", "memory")], False), settings)
    assert result.status == "evaluated"
    assert evidence.build is not None and evidence.build.status == "failed", evidence.build
    graded = result.evaluation.score
    assert graded.outcome == "model_failure:build_failed" and graded.tests_passed == 0
