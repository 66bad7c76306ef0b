"""Shared fixtures: real Docker services, the demo dataset pinned to the image built here, and evaluate.py runs.

The Docker-backed tests never skip: `services` starts dockerd and the local registry (scripts/start_services.sh) and
fails loudly when it cannot. Expensive evaluations are session fixtures, so one run serves many assertions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
DEMO_DIR = ROOT / "data" / "demo"
EXAMPLES = DEMO_DIR / "predictions" / "examples.jsonl"
PROTOCOLS_FILE = ROOT / "data" / "protocols.yaml"
DEMO_TASK_ID = "asyncodebench-demo:minicache"
RUN_LABEL = "org.asyncodebench.run_id"
# Short limits keep the Docker suite fast; the demo tests finish in about a second each.
FAST_FLAGS = ("--timeout", "20", "--probe-timeout", "10")
# Limits of the shared demo run; the hostile tests check the bounds against these.
SHARED_RUN_MEMORY, SHARED_RUN_PIDS, SHARED_RUN_WORKERS = "1g", 256, 3

# Patches whose bytes are not UTF-8: a Latin-1 file given as raw bytes in the JSONL line, and one given as the JSON
# escape `\udce9` (how Python's surrogateescape writes such bytes).
LATIN1_PATCH = (
    b"diff --git a/minicache/latin1.txt b/minicache/latin1.txt\nnew file mode 100644\n"
    b"--- /dev/null\n+++ b/minicache/latin1.txt\n@@ -0,0 +1 @@\n+caf\xe9 cr\xe8me\n"
)


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; registered here so the suite runs from any rootdir without warnings.
    config.addinivalue_line("markers", "docker: needs the Docker Engine and the local registry (started here)")
    config.addinivalue_line("markers", "fresh_debian: runs the Python setup in a stock Debian 12 container")


# --- predictions ---------------------------------------------------------------------------------


def example_predictions() -> dict[str, dict[str, Any]]:
    """The demo's example predictions by model name (gold, empty, partial, syntax error, 11 hostile ones)."""
    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    return {row["model_name_or_path"]: row for row in rows}


def prediction(model: str, patch: str | None, **extra: Any) -> dict[str, Any]:
    return {"task_id": DEMO_TASK_ID, "model_name_or_path": model, "protocol": "single", "model_patch": patch, **extra}


def jsonl(predictions: list[dict[str, Any] | bytes]) -> bytes:
    """A predictions file: dicts become JSON lines, bytes are written as given (for malformed or raw lines)."""
    return b"".join((p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n" for p in predictions)


def latin1_raw_line(model: str) -> bytes:
    """A JSONL line whose patch carries the bytes 0xE9 and 0xE8 raw (not valid UTF-8, as some tools write)."""
    line = json.dumps(prediction(model, "PATCH_HERE")).encode()
    escaped = LATIN1_PATCH.replace(b"\n", b"\\n")
    return line.replace(b"PATCH_HERE", escaped)


def latin1_escaped_line(model: str) -> bytes:
    """The same patch with the bytes as `\\udce9`-style escapes (json.dumps of a surrogate-escaped string)."""
    return json.dumps(prediction(model, LATIN1_PATCH.decode("utf-8", "surrogateescape"))).encode()


# --- evaluate.py ---------------------------------------------------------------------------------


@dataclass
class EvalRun:
    """One finished `scripts/evaluate.py` process and what it left in its run folder."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    report: dict[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self, model: str) -> dict[str, Any]:
        (row,) = [p for p in self.report["predictions"] if p["model_name_or_path"] == model]
        return row

    def folder(self, model: str) -> Path:
        (folder,) = [f for f in (self.run_dir / "predictions").iterdir() if f.name.startswith(f"{model}__")]
        return folder

    def result(self, model: str) -> dict[str, Any]:
        return json.loads((self.folder(model) / "result.json").read_text())


def wait_for(condition: Callable[[], Any], seconds: float) -> bool:
    """Poll `condition` every 0.1 s until it holds (True) or `seconds` have passed (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def script_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for running scripts/: this checkout's package first, whatever copy pip installed."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def evaluate_command(predictions_file: Path, dataset: Path, run_id: str, output_dir: Path, *flags: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / "evaluate.py"), str(predictions_file), "--dataset", str(dataset),
            "--run-id", run_id, "--output-dir", str(output_dir), *flags]


def run_evaluate(predictions: list[dict[str, Any] | bytes] | Path, dataset: Path, run_id: str, output_dir: Path,
                 *flags: str, env: dict[str, str] | None = None, timeout: float = 900) -> EvalRun:
    """Run evaluate.py as a user would, in its own process; return the parsed report.json (None if absent)."""
    if isinstance(predictions, Path):
        preds_file = predictions
    else:
        preds_file = output_dir / f"{run_id}.jsonl"
        preds_file.parent.mkdir(parents=True, exist_ok=True)
        preds_file.write_bytes(jsonl(predictions))
    done = subprocess.run(evaluate_command(preds_file, dataset, run_id, output_dir, *flags), cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=script_env(env))
    report_file = output_dir / run_id / "report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else None
    return EvalRun(done.returncode, done.stdout, done.stderr, output_dir / run_id, report)


def run_containers(run_id: str, docker_host: str | None = None) -> list[str]:
    """Ids of the containers (running or not) of runs with this run id: labelled `<run id>-<8 hex>` (the key of one
    run folder, as evaluate.py labels them) or exactly `<run id>` (scripts that label with the plain id)."""
    env = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
    done = subprocess.run(["docker", "ps", "-a", "--filter", f"label={RUN_LABEL}",
                           "--format", f'{{{{.ID}}}} {{{{.Label "{RUN_LABEL}"}}}}'],
                          capture_output=True, text=True, check=True, env=env)
    pattern = re.compile(re.escape(run_id) + r"(-[0-9a-f]{8})?")
    return [line.split(" ", 1)[0] for line in done.stdout.splitlines()
            if " " in line and pattern.fullmatch(line.split(" ", 1)[1])]


def without_run_metadata(report: dict[str, Any]) -> dict[str, Any]:
    """A report minus what legitimately differs between two runs of the same file (times, ids, paths)."""
    return {k: v for k, v in report.items() if k != "run"}


# --- sampling the run's own containers ----------------------------------------------------------

CGROUP_ROOT = Path("/sys/fs/cgroup")


def container_cgroup_value(container_id: str, controller: str, names: tuple[str, ...]) -> int | None:
    """A counter of one container's cgroup (cgroup v1 or v2, cgroupfs or systemd driver), or None when gone."""
    folders = (CGROUP_ROOT / controller / "docker" / container_id, CGROUP_ROOT / "docker" / container_id,
               CGROUP_ROOT / "system.slice" / f"docker-{container_id}.scope")
    for folder in folders:
        for name in names:
            try:
                return int((folder / name).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return None


class CpuLoad:
    """Busy processes beside a run, so that it is tested on a loaded machine: they stop by themselves after
    `seconds` (and when the block ends). They run under SCHED_IDLE: always runnable, so the load average (runnable
    processes, whatever their priority) climbs to several times the CPU count, and they take every moment of CPU
    the run leaves, while the run itself is scheduled first and finishes in reasonable time. No network."""

    def __init__(self, processes: int = 24, seconds: int = 900) -> None:
        self.processes, self.seconds = processes, seconds
        self._children: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> CpuLoad:
        # All on one CPU: the run has the other to itself, and takes this one whenever it wants it.
        cpu = max(os.sched_getaffinity(0))
        code = ("import os, time\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
                f"os.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + {self.seconds}\n"
                "while time.time() < end: pass")
        self._children = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.processes)]
        return self

    def __exit__(self, *exc: object) -> None:
        for child in self._children:
            child.kill()
            child.wait()


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


class RunSampler:
    """Samples the processes and memory of one run's containers (never the host's: other work shares it) in the
    background while the run goes on. Peaks are what the kernel's counters say, per container."""

    def __init__(self, run_id: str, interval: float = 0.1) -> None:
        import docker

        self.client = docker.from_env()
        self.run_id, self.interval = run_id, interval
        self.max_processes = 0  # in any one container of the run
        self.max_memory = 0  # peak bytes charged to any one container of the run
        self.max_load_average = 0.0  # the machine's, while the run goes on (the condition it ran under)
        self.containers_seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _run_containers(self) -> list[str]:
        listed = self.client.containers.list(sparse=True)
        return [c.id for c in listed if (c.attrs.get("Labels") or {}).get(RUN_LABEL, "").startswith(f"{self.run_id}-")]

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.max_load_average = max(self.max_load_average, load_average())
            for container_id in self._run_containers():
                pids = container_cgroup_value(container_id, "pids", ("pids.current",))
                memory = container_cgroup_value(container_id, "memory", ("memory.max_usage_in_bytes",
                                                                         "memory.peak", "memory.current"))
                if pids is not None:
                    self.containers_seen.add(container_id)
                    self.max_processes = max(self.max_processes, pids)
                self.max_memory = max(self.max_memory, memory or 0)
            time.sleep(self.interval)

    def __enter__(self) -> RunSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- fixtures ------------------------------------------------------------------------------------


class DemoDataset(NamedTuple):
    """The demo task's published folder, pinned to the image built and pushed on this machine."""

    path: Path
    pinned_ref: str
    digest: str


@pytest.fixture(scope="session")
def services() -> None:
    """dockerd and the registry, started if needed; a failure to start them fails the tests (never a skip)."""
    done = subprocess.run(["bash", str(SCRIPTS / "start_services.sh")], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"scripts/start_services.sh could not start Docker and the registry (exit {done.returncode}):\n"
                    f"{done.stdout}\n{done.stderr}", pytrace=False)


def write_task_dataset(out_dir: Path, task_files: list[Path], digest: str | None = None) -> Path:
    """A published dataset folder made of the given task sources (the demo task or variants of it)."""
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.dataset.sources import rows_from_task_files
    from asyncodebench.dataset.validation import validate_rows

    rows = rows_from_task_files(task_files, PROTOCOLS_FILE, digest_override=digest)
    validate_rows(rows)
    write_rows(rows, out_dir)
    return out_dir


def pinned(image: str, digest: str) -> str:
    """The row's `container_pinned_ref` for an `image:tag` and a digest (as the builder derives it)."""
    return f"{image.rsplit(':', 1)[0]}@{digest}"


def write_variant_dataset(out_dir: Path, digest: str, variants: list[dict[str, Any]]) -> Path:
    """A dataset folder whose task rows are the demo row with fields replaced, one row per variant.

    A variant may change `task_id`, `container_image` and `container_digest` (the pinned ref follows). Rows are
    written as given, without validation, the way a stale or tampered published folder would reach a user.
    """
    from dataclasses import replace

    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows

    rows = build_task_rows(DEMO_DIR / "task.yaml", PROTOCOLS_FILE, digest=digest)
    tasks = []
    for variant in variants:
        row = {**rows.tasks[0], **variant}
        row["container_pinned_ref"] = pinned(row["container_image"], row["container_digest"])
        tasks.append(row)
    write_rows(replace(rows, tasks=tasks), out_dir)
    return out_dir


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


def reforking_swarms() -> list[dict[str, Any]]:
    """The re-forking swarm of the hostile suite (final and checkpoint forms), so that it also races the launcher
    on a loaded machine."""
    from hostile_payloads import PatchMaker
    from hostile_tamper_payloads import SWARMS, tamper_payloads

    maker = PatchMaker()
    try:
        return [p.line for p in tamper_payloads(maker) if p.name in SWARMS]
    finally:
        maker.close()


@pytest.fixture(scope="session")
def shared_demo_run(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> Iterator[EvalRun]:
    """Every example prediction (gold, empty, partial, syntax error, the 11 hostile ones) plus two patches with
    non-UTF-8 bytes, evaluated in ONE run with three workers beside a CPU load (`CpuLoad`), while its containers'
    processes and memory are sampled."""
    # The slow ones first, so the other worker gets through the rest meanwhile.
    slow_first = ("hostile-infinite-loop", "hostile-memory-hog", "hostile-fork-bomb")
    examples = sorted(example_predictions().values(), key=lambda p: p["model_name_or_path"] not in slow_first)
    lines: list[dict[str, Any] | bytes] = [*examples, latin1_raw_line("hostile-latin1-raw"),
                                           latin1_escaped_line("hostile-latin1-escaped"), *reforking_swarms()]
    escape = Path("/tmp/asyncodebench-escape.txt")
    escape.unlink(missing_ok=True)
    flags = (*FAST_FLAGS, "--max-workers", str(SHARED_RUN_WORKERS), "--memory", SHARED_RUN_MEMORY,
             "--pids", str(SHARED_RUN_PIDS))
    # On a loaded machine: the load average climbs past 4x the CPU count during the run (its own test checks it);
    # 24 always-runnable processes take it past 8 within about 25 s, well before the run ends.
    with CpuLoad(), RunSampler("shared-demo") as sampler:
        run = evaluate(lines, demo_dataset.path, *flags, run_id="shared-demo")
    run.extra.update(sampler=sampler, lines=lines,
                     containers_left=run_containers("shared-demo"), escape_file_exists=escape.exists())
    yield run


class RebuiltDemo(NamedTuple):
    """The demo task's image rebuilt from its recipe by scripts/build_task_image.py, and what the build left."""

    map_path: Path  # the image map the build wrote
    pinned_ref: str  # what the build printed
    entry: dict[str, Any]  # the map's entry for the demo task
    repo: Path  # the git repository built from: the base commit and, after it, the complete code
    reference: str  # the commit holding the complete code (the gold patch applied)
    stderr: str


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
