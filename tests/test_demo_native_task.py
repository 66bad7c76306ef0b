"""The embedded native demo task (vecstats, data/demo-native) keeps its promises: its image holds the base commit and
a build tree already up to date; the base fails as recorded; gold without a build still fails on the missing C
symbols and passes everything once `cmake --build build --parallel` has run; no_compile does not build; every patch
and prediction applies to the base; the data files agree with each other.

One image for the whole module, and one container per check (as the sandbox user `nobody`, with no network)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.checkout import PROTOCOLS_FILE, ROOT
from helpers.dataset_folders import DemoDataset

from asyncodebench.dataset.build import build_task_rows
from asyncodebench.harness.integration import INTEGRATED_PROTOCOLS
from asyncodebench.images import demo as demo_image
from asyncodebench.images.demo import NATIVE_DEMO, make_base_repo
from asyncodebench.images.registry import registry_port_from_env
from asyncodebench.run.predictions import read_predictions

TASK = yaml.safe_load(NATIVE_DEMO.task_yaml.read_text())
PATCHES = NATIVE_DEMO.folder / "patches"
PREDICTIONS = NATIVE_DEMO.folder / "predictions"
HOSTILE_BUILDS = ["build_writes_outside", "build_network", "build_fork_bomb", "build_fills_disk", "build_runs_forever"]
SPECIALISTS = {s["agent_id"]: s for s in TASK["specialists"]}
NOBODY = 65534  # the harness's sandbox user


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True, check=False)


def _snapshot(snapshot_id: str) -> dict[str, int]:
    (snapshot,) = [s for s in TASK["expected_test_counts"] if s["snapshot_id"] == snapshot_id]
    return {key: snapshot[key] for key in ("collected", "passed", "failed", "errors", "skipped")}


def _probes(*kinds: str) -> list[str]:
    return [node for dep in TASK["dependencies"] for kind in kinds for node in dep[f"{kind}_probe_tests"]]


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("vecstats") / "base"
    make_base_repo(repo, task=NATIVE_DEMO)
    return repo


def _changed_by(base_repo: Path, tmp_path: Path, patch: str) -> dict[str, str]:
    """The files a patch changes, with their text after it, applied in a fresh clone of the base."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(base_repo), str(clone)], check=True)
    assert _git(clone, "apply", "-", stdin=patch).returncode == 0
    _git(clone, "add", "--all")
    names = _git(clone, "diff", "--cached", "--name-only").stdout.split()
    return {name: (clone / name).read_text() for name in names}


# --- without Docker ----------------------------------------------------------------------------


def test_base_commit_is_the_row_base_revision(base_repo: Path, tmp_path: Path) -> None:
    assert _git(base_repo, "rev-parse", "HEAD").stdout.strip() == TASK["base_revision"]
    assert make_base_repo(tmp_path / "again", task=NATIVE_DEMO) == TASK["base_revision"]
    assert _git(base_repo, "status", "--porcelain").stdout == ""
    assert (base_repo / ".gitignore").read_text() == "/build/\n"


def test_task_source_makes_valid_rows_with_a_native_build() -> None:
    rows = build_task_rows(NATIVE_DEMO.task_yaml, PROTOCOLS_FILE)
    assert [t["task_id"] for t in rows.tasks] == ["asyncodebench-demo:vecstats"]
    assert len(rows.dependencies) == 3 and len(rows.scenarios) == 5
    builds = yaml.safe_load((ROOT / "data" / "native_builds.yaml").read_text())
    assert builds[TASK["task_id"]]["build_dir"] == NATIVE_DEMO.build_dir == "build"
    assert set(TASK["single_agent_writable_paths"]) == {p for s in SPECIALISTS.values() for p in s["writable_paths"]}


def test_every_patch_applies_to_the_base(base_repo: Path) -> None:
    names = sorted(p.stem for p in PATCHES.glob("*.patch"))
    assert {"gold", "no_compile", "producer_only", "consumer_only", *HOSTILE_BUILDS} <= set(names)
    for name in names:
        done = _git(base_repo, "apply", "--check", "-", stdin=(PATCHES / f"{name}.patch").read_text())
        assert done.returncode == 0, f"{name}: {done.stderr}"


def test_gold_changes_the_cpp_and_the_python_side(base_repo: Path, tmp_path: Path) -> None:
    changed = _changed_by(base_repo, tmp_path, (PATCHES / "gold.patch").read_text())
    assert {"include/vecstats.h", "src/spread.cpp", "src/order.cpp", "vecstats/stats.py"} == set(changed)


@pytest.mark.parametrize("name, agent_id", [("producer_only", "native_agent"), ("consumer_only", "python_agent")])
def test_agent_patches_stay_in_their_writable_paths(base_repo: Path, tmp_path: Path, name: str, agent_id: str) -> None:
    changed = _changed_by(base_repo, tmp_path, (PATCHES / f"{name}.patch").read_text())
    assert changed and set(changed) <= set(SPECIALISTS[agent_id]["writable_paths"])


@pytest.mark.parametrize("name", HOSTILE_BUILDS)
def test_hostile_builds_are_gold_plus_a_build_change(base_repo: Path, tmp_path: Path, name: str) -> None:
    gold = _changed_by(base_repo, tmp_path / "gold", (PATCHES / "gold.patch").read_text())
    hostile = _changed_by(base_repo, tmp_path / "hostile", (PATCHES / f"{name}.patch").read_text())
    assert "CMakeLists.txt" in hostile and "add_dependencies(vecstats" in hostile["CMakeLists.txt"]
    assert {k: v for k, v in hostile.items() if k in gold} == gold
    assert all(k == "CMakeLists.txt" or k.startswith("cmake/") for k in set(hostile) - set(gold))


def test_predictions_are_valid_and_apply(base_repo: Path) -> None:
    known = {TASK["task_id"]: set(SPECIALISTS)}
    files = sorted(PREDICTIONS.glob("*.jsonl"))
    assert {f.name for f in files} >= {"examples.jsonl", "hostile_builds.jsonl", "multiagent.jsonl",
                                       "checkpoints.jsonl"}
    protocols = set()
    for path in files:
        read = read_predictions(path, known, None)
        assert read.problems == () and read.predictions, path.name
        for prediction in read.predictions:
            assert prediction.model.startswith("demo-native-")
            protocols.add(prediction.protocol)
            patches = [prediction.model_patch, *prediction.agent_patches.values(),
                       *(c.patch or "" for c in prediction.checkpoints)]
            for patch in filter(None, patches):
                assert _git(base_repo, "apply", "--check", "-", stdin=patch).returncode == 0, prediction.model
            if prediction.agent_patches:
                assert prediction.protocol in INTEGRATED_PROTOCOLS and set(prediction.agent_patches) == set(known[
                    TASK["task_id"]])
    assert {"single", "serial_specialists", "async_private"} <= protocols


# --- with Docker -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def native_image(native_demo_dataset: DemoDataset) -> demo_image.BuiltImage:
    # The session's build (the cold one makes a Debian rootfs with g++ and CMake: about a minute and a half).
    return demo_image.build(registry_port_from_env(), task=NATIVE_DEMO)


def _in_container(image: demo_image.BuiltImage, script: str, patch: str | None = None) -> subprocess.CompletedProcess:
    """`script` in /testbed as the sandbox user, with no network, after root applied `patch` (a name in patches/)
    and handed the tree to that user, as the harness does with its build tree."""
    setup = "cd /testbed"
    if patch:
        setup += f" && git apply /patches/{patch}.patch"
    setup += f" && chown -R {NOBODY}:{NOBODY} /testbed"
    run_as = f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env HOME=/tmp bash -c {shlex.quote(script)}"
    return subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{PATCHES}:/patches:ro",
                           image.pinned_ref, "bash", "-c", f"{setup} && cd /testbed && {run_as}"],
                          capture_output=True, text=True, timeout=300, check=False)


BUILD = "cmake --build build --parallel"


def _evaluate(image: demo_image.BuiltImage, patch: str | None, build: bool) -> tuple[dict[str, dict], str]:
    """The task's evaluator with a JSON report, after an optional build; (node id -> test record, build output)."""
    command = list(TASK["evaluator_command"])
    command[-1:-1] = ["--json-report", "--json-report-file=/tmp/report.json"]
    script = (f"{BUILD} > /tmp/build.log 2>&1 || echo BUILD-FAILED >> /tmp/build.log; " if build else "")
    script += f"{shlex.join(command)} > /dev/null 2>&1; cat /tmp/build.log >&2 2>/dev/null; cat /tmp/report.json"
    done = _in_container(image, script, patch)
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout)
    return {test["nodeid"]: test for test in report["tests"]}, done.stderr


def _counts(tests: dict[str, dict]) -> dict[str, int]:
    values = [test["outcome"] for test in tests.values()]
    return {"collected": len(values), "passed": values.count("passed"), "failed": values.count("failed"),
            "errors": values.count("error"), "skipped": values.count("skipped")}


@pytest.mark.docker
def test_image_is_pinned_and_a_rebuild_gives_the_same_digest(native_image: demo_image.BuiltImage) -> None:
    port = registry_port_from_env()
    assert native_image.pinned_ref == f"127.0.0.1:{port}/asyncodebench/demo-vecstats@{native_image.digest}"
    assert native_image.base_revision == TASK["base_revision"]
    assert demo_image.build(port, task=NATIVE_DEMO) == native_image  # the build tree comes from the cache


@pytest.mark.docker
def test_base_build_tree_is_there_and_up_to_date(native_image: demo_image.BuiltImage) -> None:
    done = _in_container(native_image, "git rev-parse HEAD && git status --porcelain && test -f build/build.ninja "
                                       "&& test -f build/libvecstats.so && cmake --build build")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == TASK["base_revision"]
    assert lines[1:] == ["ninja: no work to do."]  # the tree is clean (build/ is ignored) and nothing is rebuilt


@pytest.mark.docker
def test_base_state_fails_as_recorded(native_image: demo_image.BuiltImage) -> None:
    tests, _ = _evaluate(native_image, None, build=False)
    assert _counts(tests) == _snapshot("demo_base")
    assert {tests[node]["outcome"] for node in _probes("upstream", "downstream")} == {"failed"}


@pytest.mark.docker
def test_gold_without_a_build_fails_on_the_missing_symbols(native_image: demo_image.BuiltImage) -> None:
    tests, _ = _evaluate(native_image, "gold", build=False)
    assert _counts(tests) == _snapshot("demo_base")
    upstream = [tests[node] for node in _probes("upstream")]
    assert {test["outcome"] for test in upstream} == {"failed"}
    messages = " ".join(test["call"]["crash"]["message"] for test in upstream)
    for symbol in ("vs_variance", "vs_median", "vs_quantile"):
        assert f"libvecstats.so: undefined symbol: {symbol}" in messages


@pytest.mark.docker
def test_gold_with_the_build_step_passes_everything(native_image: demo_image.BuiltImage) -> None:
    tests, build_log = _evaluate(native_image, "gold", build=True)
    assert "BUILD-FAILED" not in build_log and "Linking CXX shared library libvecstats.so" in build_log
    assert _counts(tests) == _snapshot("demo_gold_sanity")
    probes = set(_probes("upstream", "downstream", "integrated"))
    assert probes <= set(tests), f"probe ids not collected: {sorted(probes - set(tests))}"


@pytest.mark.docker
def test_producer_only_passes_the_upstream_probes_only(native_image: demo_image.BuiltImage) -> None:
    tests, _ = _evaluate(native_image, "producer_only", build=True)
    assert {tests[node]["outcome"] for node in _probes("upstream")} == {"passed"}
    assert {tests[node]["outcome"] for node in _probes("downstream")} == {"failed"}


@pytest.mark.docker
def test_no_compile_fails_the_build(native_image: demo_image.BuiltImage) -> None:
    done = _in_container(native_image, BUILD, "no_compile")
    assert done.returncode != 0
    assert "src/spread.cpp" in done.stdout and "error:" in done.stdout
