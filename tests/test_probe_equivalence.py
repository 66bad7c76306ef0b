"""METRICS decision 8: the batched probes (`run_probes` + `selector_results`) give every selector the status the
upstream per-selector method gives, on real containers of the demo task, in states where batching could differ."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest

from asyncodebench.metrics import DependencyPoint
from asyncodebench.probes import run_probes, selector_results
from asyncodebench.rows import load_published
from asyncodebench.sandbox import Limits, Sandbox, docker_client
from asyncodebench.spec import TaskSpec
from asyncodebench.workspace import IO_DIR
from conftest import DEMO_DIR, DEMO_TASK_ID, DemoDataset
from per_selector import per_selector_results

pytestmark = pytest.mark.docker

PROBE_TIMEOUT = 20
PATCHES = DEMO_DIR / "patches"
MISSING_SELECTORS = ("tests/test_core.py::test_does_not_exist", "tests/test_nowhere.py::test_x")
MEMORY_HOG = """\
--- a/minicache/core.py
+++ b/minicache/core.py
@@ -48,4 +48,5 @@ class LRUCache:
 
 def make_key(args: tuple, kwargs: dict, typed: bool = False) -> tuple:
     \"\"\"A hashable key for a call; with `typed`, 1 and 1.0 (or True and 1) give different keys.\"\"\"
-    raise NotImplementedError("make_key is not written yet")
+    hoard = [b"\\xff" * (1 << 30) for _ in range(16)]
+    return tuple(args) + (len(hoard),)
"""


@pytest.fixture(scope="module")
def spec(demo_dataset: DemoDataset) -> TaskSpec:
    rows = load_published(str(demo_dataset.path)).rows
    (task,) = [t for t in rows.tasks if t["task_id"] == DEMO_TASK_ID]
    return TaskSpec.from_rows(task, rows.dependencies)


@pytest.fixture(scope="module")
def box(spec: TaskSpec) -> Iterator[Sandbox]:
    with Sandbox(docker_client(), spec.pinned_ref, "probe-equivalence", Limits(memory="512m"), spec.workdir) as box:
        box.exec(f"mkdir -p {IO_DIR}", 60)  # run_probes writes there; evaluate_patch creates it first
        yield box


def set_state(box: Sandbox, spec: TaskSpec, patch: bytes = b"", after: str = "true") -> None:
    """Reset the checkout to the base commit, apply `patch`, then run the shell command `after`."""
    box.write_files({"state.diff": patch}, "/tmp")
    script = (f"git reset -q --hard {spec.base_revision} && git clean -qfdx && "
              f"{{ [ ! -s /tmp/state.diff ] || git apply /tmp/state.diff; }} && {after}")
    done = box.exec(script, 60)
    assert done.exit_code == 0, done.output.decode(errors="replace")


def compare(box: Sandbox, spec: TaskSpec) -> tuple[dict[str, str], dict[str, str], str]:
    """(batched statuses, per-selector statuses, probe mode) of the current workspace state."""
    run = run_probes(box, spec, PROBE_TIMEOUT)
    batched = {s: r.status for s, r in selector_results(run, spec.selectors).items()}
    reference = {s: r.status for s, r in per_selector_results(box, spec, PROBE_TIMEOUT).items()}
    return batched, reference, run.mode


@pytest.mark.parametrize("patch, expected", [
    ("", {"failed", "passed"}),
    ("partial.patch", {"failed", "passed"}),
    ("gold.patch", {"passed"}),
    ("syntax_error.patch", {"not_collected", "passed", "failed"}),
], ids=["base", "partial", "gold", "syntax-error"])
def test_batched_statuses_equal_per_selector_statuses(box: Sandbox, spec: TaskSpec, patch: str,
                                                      expected: set[str]) -> None:
    set_state(box, spec, (PATCHES / patch).read_bytes() if patch else b"")
    batched, reference, _ = compare(box, spec)
    assert batched == reference
    assert set(reference.values()) <= expected and len(reference) == 15


def test_a_probe_module_that_fails_to_import_gives_the_same_statuses(box: Sandbox, spec: TaskSpec) -> None:
    """tests/test_api.py cannot be imported; test_core.py's selectors still pass in the shared run."""
    set_state(box, spec, (PATCHES / "gold.patch").read_bytes(),
              after="sed -i '1i import module_that_does_not_exist' tests/test_api.py")
    batched, reference, _ = compare(box, spec)
    assert batched == reference
    assert {reference[s] for s in spec.selectors if s.startswith("tests/test_api.py")} == {"not_collected"}
    assert {reference[s] for s in spec.selectors if s.startswith("tests/test_core.py")} == {"passed"}


def test_a_selector_naming_no_test_gives_the_same_statuses(box: Sandbox, spec: TaskSpec) -> None:
    """pytest stops with a usage error on an unknown node id, so the batch cannot stand for the others."""
    extra = DependencyPoint("demo.missing_probes", "core_agent", "api_agent", (), (), MISSING_SELECTORS, (),
                            MISSING_SELECTORS, "", ("ADPR",))
    with_missing = dataclasses.replace(spec, dependencies=spec.dependencies + (extra,))
    set_state(box, with_missing, (PATCHES / "gold.patch").read_bytes())
    batched, reference, mode = compare(box, with_missing)
    assert batched == reference and mode == "per_selector"
    assert [reference[s] for s in MISSING_SELECTORS] == ["not_collected", "not_collected"]
    assert {reference[s] for s in spec.selectors} == {"passed"}


def test_a_probe_killed_for_memory_is_not_collected_as_per_selector(box: Sandbox, spec: TaskSpec) -> None:
    set_state(box, spec, MEMORY_HOG.encode())
    batched, reference, _ = compare(box, spec)
    assert "not_collected" in reference.values()
    assert batched == reference
