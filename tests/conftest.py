"""Shared fixtures: real Docker services, the demo dataset pinned to the image built here, and evaluate.py runs.

The Docker-backed tests never skip: `services` starts dockerd and the local registry (scripts/start_services.sh) and
fails loudly when it cannot. Expensive evaluations are session fixtures, so one run serves many assertions. Only
fixtures and hooks live here; what tests import lives in tests/helpers/.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID, PROTOCOLS_FILE, SCRIPTS, script_env
from helpers.chromium import headless_chromium
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset, RebuiltDemo, write_task_dataset
from helpers.demo_run import (
    FAST_FLAGS,
    NATIVE_RUN_BUILD_SECONDS,
    SHARED_RUN_MEMORY,
    SHARED_RUN_PIDS,
    SHARED_RUN_WORKERS,
    EvalRun,
    run_evaluate,
)
from helpers.load import CpuLoad, RunSampler
from helpers.predictions import example_predictions, latin1_escaped_line, latin1_raw_line


def session_run_id(name: str) -> str:
    """A run id of this test session's own: another session on the machine (CI beside a developer's run) may run
    the same fixture at the same time, and containers are counted and sampled by run id."""
    return f"{name}-{secrets.token_hex(3)}"


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; registered here so the suite runs from any rootdir without warnings.
    config.addinivalue_line("markers", "docker: needs the Docker Engine and the local registry (started here)")
    config.addinivalue_line("markers", "fresh_debian: runs the Python setup in a stock Debian 12 container")
    config.addinivalue_line("markers", "mirror: needs the olah Hub mirror on 127.0.0.1 (started by the test)")
    config.addinivalue_line("markers", "ray: starts Ray nodes of its own on this machine")


# The tiers follow from what a test uses, not from a marker someone must remember: any test whose fixtures reach
# `services` (dockerd and the registry) is a `docker` test, so `-m "not docker"` never needs Docker; the modules'
# `hub` fixtures start the olah mirror.
FIXTURE_MARKERS = {"services": "docker", "hub": "mirror"}


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in used:
                item.add_marker(marker)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the whole session (Playwright's sync API allows one at a time in a process)."""
    with headless_chromium() as launched:
        yield launched


@pytest.fixture(scope="session")
def services() -> None:
    """dockerd and the registry, started if needed; a failure to start them fails the tests (never a skip)."""
    done = subprocess.run(["bash", str(SCRIPTS / "start_services.sh")], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"scripts/start_services.sh could not start Docker and the registry (exit {done.returncode}):\n"
                    f"{done.stdout}\n{done.stderr}", pytrace=False)


@pytest.fixture(scope="session")
def demo_dataset(services: None, tmp_path_factory: pytest.TempPathFactory) -> DemoDataset:
    """What scripts/prepare_demo.py does: build and push the demo image, write its rows pinned to the digest."""
    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.images.demo import DEMO_TASK_YAML, build
    from asyncodebench.images.registry import registry_port_from_env

    image = build(registry_port_from_env())
    out = tmp_path_factory.mktemp("demo-dataset")
    write_rows(build_task_rows(DEMO_TASK_YAML, PROTOCOLS_FILE, digest=image.digest), out)
    return DemoDataset(out, image.pinned_ref, image.digest)


@pytest.fixture(scope="session")
def demo_spec(demo_dataset: DemoDataset) -> Any:
    """The demo task's spec as the harness reads it from the published rows."""
    from asyncodebench.dataset.rows import load_published
    from asyncodebench.harness.spec import TaskSpec

    rows = load_published(str(demo_dataset.path)).rows
    (task,) = [t for t in rows.tasks if t["task_id"] == DEMO_TASK_ID]
    return TaskSpec.from_rows(task, rows.dependencies)


@pytest.fixture(scope="session")
def offline_demo_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo rows as committed (digest of data/demo/task.yaml): enough for everything that starts no container."""
    return write_task_dataset(tmp_path_factory.mktemp("offline-demo"), [DEMO_DIR / "task.yaml"])


@pytest.fixture(scope="session")
def evaluate(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., EvalRun]:
    """`evaluate(predictions, dataset, *flags, run_id=None, env=None)`: run evaluate.py, return its report."""
    output_dir = tmp_path_factory.mktemp("runs")
    counter = iter(range(1_000_000))

    def _evaluate(predictions: list[dict[str, Any] | bytes] | Path, dataset: Path, *flags: str,
                  run_id: str | None = None, env: dict[str, str] | None = None) -> EvalRun:
        return run_evaluate(predictions, dataset, run_id or f"run{next(counter)}", output_dir, *flags, env=env)

    return _evaluate


@pytest.fixture(scope="session")
def shared_demo_run(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> Iterator[EvalRun]:
    """Every example prediction (gold, empty, partial, syntax error, the 11 hostile ones) plus two patches with
    non-UTF-8 bytes, evaluated in ONE run with three workers beside a CPU load (`CpuLoad`), while its containers'
    processes and memory are sampled."""
    from helpers.payloads.tamper import reforking_swarms

    # The slow ones first, so the other worker gets through the rest meanwhile.
    slow_first = ("hostile-infinite-loop", "hostile-memory-hog", "hostile-fork-bomb")
    examples = sorted(example_predictions().values(), key=lambda p: p["model_name_or_path"] not in slow_first)
    lines: list[dict[str, Any] | bytes] = [*examples, latin1_raw_line("hostile-latin1-raw"),
                                           latin1_escaped_line("hostile-latin1-escaped"), *reforking_swarms()]
    escape = Path("/tmp/asyncodebench-escape.txt")
    escape.unlink(missing_ok=True)
    flags = (*FAST_FLAGS, "--max-workers", str(SHARED_RUN_WORKERS), "--memory", SHARED_RUN_MEMORY,
             "--pids", str(SHARED_RUN_PIDS))
    # On a loaded machine: 24 always-runnable hogs for the whole run (its own test checks they lasted and ran).
    run_id = session_run_id("shared-demo")
    with CpuLoad() as load, RunSampler(run_id) as sampler:
        run = evaluate(lines, demo_dataset.path, *flags, run_id=run_id)
    run.extra.update(sampler=sampler, load=load, lines=lines, run_id=run_id,
                     containers_left=run_containers(run_id), escape_file_exists=escape.exists())
    yield run


@pytest.fixture(scope="session")
def native_demo_dataset(services: None, tmp_path_factory: pytest.TempPathFactory) -> DemoDataset:
    """The native demo task (vecstats) as scripts/prepare_demo.py makes it: image built and pushed, rows pinned."""
    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.images.demo import NATIVE_DEMO, build
    from asyncodebench.images.registry import registry_port_from_env

    image = build(registry_port_from_env(), task=NATIVE_DEMO)
    out = tmp_path_factory.mktemp("native-demo-dataset")
    write_rows(build_task_rows(NATIVE_DEMO.task_yaml, PROTOCOLS_FILE, digest=image.digest), out)
    return DemoDataset(out, image.pinned_ref, image.digest)


@pytest.fixture(scope="session")
def native_demo_run(native_demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> EvalRun:
    """Every example prediction of the native demo (gold, empty, partial, no_compile, the hostile builds, multi-agent
    and checkpoint replays), evaluated in ONE run; builds limited to NATIVE_RUN_BUILD_SECONDS and 256 MB."""
    from asyncodebench.images.demo import NATIVE_DEMO

    lines = [json.loads(line) for path in sorted((NATIVE_DEMO.folder / "predictions").glob("*.jsonl"))
             for line in path.read_text().splitlines() if line.strip()]
    slow_first = ("demo-native-build-runs-forever", "demo-native-build-fork-bomb")
    lines.sort(key=lambda p: p["model_name_or_path"] not in slow_first)
    flags = (*FAST_FLAGS, "--max-workers", "2", "--memory", SHARED_RUN_MEMORY, "--pids", str(SHARED_RUN_PIDS),
             "--build-timeout", str(NATIVE_RUN_BUILD_SECONDS), "--build-space", "256m")
    run_id = session_run_id("native-demo")
    run = evaluate(lines, native_demo_dataset.path, *flags, run_id=run_id)
    run.extra.update(lines=lines, run_id=run_id, containers_left=run_containers(run_id))
    return run


@pytest.fixture(scope="session")
def rebuilt_demo(demo_dataset: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> RebuiltDemo:
    """One rebuild of the demo image on the offline Debian base, shared by the image-map and validation tests."""
    from asyncodebench.images.demo import make_base_repo

    scratch = tmp_path_factory.mktemp("rebuilt-demo")
    repo = scratch / "minicache"
    make_base_repo(repo)
    git = ["git", "-C", str(repo), "-c", "user.name=AsynCodeBench tests", "-c", "user.email=tests@invalid"]
    subprocess.run([*git, "apply", str(DEMO_DIR / "patches" / "gold.patch")], check=True)
    subprocess.run([*git, "commit", "--quiet", "--all", "--no-verify", "-m", "the complete code"], check=True)
    reference = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    map_path = scratch / "rebuilt-images.json"
    built = subprocess.run([sys.executable, str(SCRIPTS / "build_task_image.py"), DEMO_TASK_ID, "--repo", str(repo),
                            "--base", "local", "--map", str(map_path)],
                           capture_output=True, text=True, env=script_env(), timeout=900)
    if built.returncode != 0:
        pytest.fail(f"build_task_image.py failed (exit {built.returncode}):\n{built.stderr[-3000:]}", pytrace=False)
    entry = json.loads(map_path.read_text())["images"][DEMO_TASK_ID]
    return RebuiltDemo(map_path, built.stdout.strip(), entry, repo, reference, built.stderr)
