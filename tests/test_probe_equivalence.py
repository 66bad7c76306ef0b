"""METRICS decision 8: the harness's probes (batched, each pytest process in a fresh isolated container) give every
selector the status the upstream per-selector method gives in a plain container, on real containers of the demo
task, in states where batching or isolation could differ."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest
from helpers.checkout import DEMO_DIR
from helpers.per_selector_probes import ReferenceBox

from asyncodebench.harness.evaluation import Settings, Workbench
from asyncodebench.harness.probes import selector_results
from asyncodebench.harness.sandbox import Limits, docker_client, remove_run_containers
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.scoring.dependency import DependencyPoint

pytestmark = pytest.mark.docker

PROBE_TIMEOUT = 20
PATCHES = DEMO_DIR / "patches"
MISSING_SELECTORS = ("tests/test_core.py::test_does_not_exist", "tests/test_nowhere.py::test_x")
RUN_ID = "probe-equivalence"
BROKEN_API_IMPORT = """\
--- a/tests/test_api.py
+++ b/tests/test_api.py
@@ -1,3 +1,4 @@
+import module_that_does_not_exist
 import pytest
 
 from minicache.api import memoize
"""  # noqa: W293 (a diff's blank context line is one space)
MEMORY_HOG = """\
--- a/minicache/core.py
+++ b/minicache/core.py
@@ -48,4 +48,5 @@ class LRUCache:
 
 def make_key(args: tuple, kwargs: dict, typed: bool = False) -> tuple:
     \"\"\"A hashable key for a call; with `typed`, 1 and 1.0 (or True and 1) give different keys.\"\"\"
-    raise NotImplementedError("make_key is not written yet")
+    hoard = [b"\\xff" * (1 << 30) for _ in range(16)]
+    return tuple(args) + (len(hoard),)
"""  # noqa: W293 (a diff's blank context line is one space)


@pytest.fixture(scope="module")
def spec(demo_spec: TaskSpec) -> TaskSpec:
    return demo_spec


@pytest.fixture(scope="module")
def box(spec: TaskSpec) -> Iterator[ReferenceBox]:
    with ReferenceBox(docker_client(), spec, memory="512m") as box:
        yield box


def compare(box: ReferenceBox, spec: TaskSpec, patch: bytes,
            after: str = "true") -> tuple[dict[str, str], dict[str, str], str]:
    """(harness statuses, upstream per-selector statuses, probe mode) of a state.

    The upstream side gets the state with `git apply` and the shell command `after`; the harness gets `patch`
    (plus, for `after`, the same change as a patch of its own when the test needs one).
    """
    client = docker_client()
    bench = Workbench.open(client, spec, RUN_ID, Settings(probe_timeout=PROBE_TIMEOUT, limits=Limits(memory="512m")),
                           {})
    try:
        _, run = bench.probe(patch)
    finally:
        remove_run_containers(client, RUN_ID)
    batched = {s: r.status for s, r in selector_results(run, spec.selectors).items()}
    box.set_state(patch, after)
    reference = {s: r.status for s, r in box.per_selector_results(PROBE_TIMEOUT, spec.selectors).items()}
    return batched, reference, run.mode


@pytest.mark.parametrize("patch, expected", [
    ("", {"failed", "passed"}),
    ("partial.patch", {"failed", "passed"}),
    ("gold.patch", {"passed"}),
    ("syntax_error.patch", {"not_collected", "passed", "failed"}),
], ids=["base", "partial", "gold", "syntax-error"])
def test_batched_statuses_equal_per_selector_statuses(box: ReferenceBox, spec: TaskSpec, patch: str,
                                                      expected: set[str]) -> None:
    batched, reference, _ = compare(box, spec, (PATCHES / patch).read_bytes() if patch else b"")
    assert batched == reference
    assert set(reference.values()) <= expected and len(reference) == 15


def test_a_probe_module_that_fails_to_import_gives_the_same_statuses(box: ReferenceBox, spec: TaskSpec) -> None:
    """tests/test_api.py cannot be imported; test_core.py's selectors still pass in the shared run. (A patch may not
    edit test files, so the harness side gets the broken module through a test target of a variant spec.)"""
    gold = (PATCHES / "gold.patch").read_bytes()
    unprotected = dataclasses.replace(spec, protected_paths=(), test_targets=("tests/test_core.py",))
    batched, reference, _ = compare(box, unprotected, gold + BROKEN_API_IMPORT.encode(),
                                    after="true")
    assert batched == reference
    assert {reference[s] for s in spec.selectors if s.startswith("tests/test_api.py")} == {"not_collected"}
    assert {reference[s] for s in spec.selectors if s.startswith("tests/test_core.py")} == {"passed"}


def test_a_selector_naming_no_test_gives_the_same_statuses(box: ReferenceBox, spec: TaskSpec) -> None:
    """pytest stops with a usage error on an unknown node id, so the batch cannot stand for the others."""
    extra = DependencyPoint("demo.missing_probes", "core_agent", "api_agent", (), (), MISSING_SELECTORS, (),
                            MISSING_SELECTORS, "", ("ADPR",))
    with_missing = dataclasses.replace(spec, dependencies=spec.dependencies + (extra,))
    batched, reference, mode = compare(box, with_missing, (PATCHES / "gold.patch").read_bytes())
    assert batched == reference and mode == "per_selector"
    assert [reference[s] for s in MISSING_SELECTORS] == ["not_collected", "not_collected"]
    assert {reference[s] for s in spec.selectors} == {"passed"}


def test_a_probe_killed_for_memory_is_not_collected_as_per_selector(box: ReferenceBox, spec: TaskSpec) -> None:
    batched, reference, _ = compare(box, spec, MEMORY_HOG.encode())
    assert "not_collected" in reference.values()
    assert batched == reference
