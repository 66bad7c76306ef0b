"""Evaluate one patch of one task in a fresh container and collect the raw evidence.

The stages inside the container: prepare (base state, overlays, patch, restore tests, remove hazards), the
evaluator under its time limit, then the dependency probes on the final state. Only raw facts come back here;
grading them is `grading`'s job, so saved evidence can be regraded without containers.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from asyncodebench.incontainer import prepare as prepare_script
from asyncodebench.patches import touched_paths
from asyncodebench.probes import ProbeRun, run_probes
from asyncodebench.sandbox import Limits, Sandbox, SandboxUnavailableError
from asyncodebench.spec import TaskSpec
from asyncodebench.workspace import IO_DIR, KILL_GRACE_SECONDS, read_exit_code, read_report, read_tail, timed_shell



@dataclass(frozen=True)
class Settings:
    """How evaluations run. Defaults are the official profile's limits."""

    timeout: int = 900  # seconds for the evaluator (official: 900)
    probe_timeout: int = 60  # seconds per probe selector (official: 60)
    run_probes: bool = True
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Preparation:
    """What happened to the workspace before the evaluator ran (read before any evaluated code runs)."""

    patch_status: str  # empty | applied | applied_with_fuzz | failed | unsafe_paths
    patch_log: str
    unsafe_paths: tuple[str, ...]
    canonical_ref: str
    restored_paths: tuple[str, ...]
    untracked_paths_removed: tuple[str, ...]
    hazards_removed: tuple[str, ...]
    changed_paths: tuple[str, ...]


@dataclass(frozen=True)
class Evidence:
    """The raw outcome of one evaluation, saved as artifacts and graded from them."""

    preparation: Preparation
    exit_code: int | None
    timed_out: bool
    killed_by_watchdog: bool
    evaluator_seconds: float
    output: str
    report: dict[str, Any] | None  # pytest-json-report, None when missing; {} when unreadable
    probes: ProbeRun | None
    container_name: str
    command: tuple[str, ...]

    def execution_record(self) -> dict[str, Any]:
        """Everything but the bulky output and report, as saved in `execution.json`."""
        record = asdict(self)
        for bulky in ("output", "report", "probes"):
            record.pop(bulky)
        return record


def evaluate_patch(client: Any, spec: TaskSpec, patch: bytes, run_id: str, settings: Settings,
                   overlays: dict[str, bytes]) -> Evidence:
    """Run the full procedure for one patch.

    Raises:
        SandboxUnavailableError: the container engine failed; the prediction was not evaluated.
    """
    paths = touched_paths(patch.decode("utf-8", errors="surrogateescape"))
    with Sandbox(client, spec.pinned_ref, run_id, settings.limits, spec.workdir) as box:
        preparation = _prepare(box, spec, b"" if paths.unsafe else patch, overlays)
        if paths.unsafe:
            preparation = _replace(preparation, patch_status="unsafe_paths", unsafe_paths=paths.unsafe)
        command = evaluator_command(spec)
        if preparation.patch_status in ("failed", "unsafe_paths"):
            # The model's patch never reached the code: nothing to run, scored against the expected total.
            return Evidence(preparation, None, False, False, 0.0, "", None, None, box.name, command)
        script = timed_shell(spec.workdir, command, settings.timeout, "evaluator")
        run = box.exec(script, settings.timeout + KILL_GRACE_SECONDS)
        exit_code = None if run.killed_by_watchdog else read_exit_code(box, "evaluator")
        output = "" if run.killed_by_watchdog else read_tail(box, "evaluator")
        report = None if run.killed_by_watchdog else read_report(box, f"{IO_DIR}/report.json")
        timed_out = run.killed_by_watchdog or exit_code == 124
        # A container the watchdog killed is gone: its probes cannot run and count as not passed.
        wanted = settings.run_probes and not run.killed_by_watchdog
        probes = run_probes(box, spec, settings.probe_timeout) if wanted else None
        return Evidence(preparation, exit_code, timed_out, run.killed_by_watchdog, round(run.duration_seconds, 3),
                        output, report, probes, box.name, command)


def evaluator_command(spec: TaskSpec) -> tuple[str, ...]:
    """The evaluator as it runs: the task's pytest options, a JSON report, then its targets (METRICS 1.3)."""
    return (spec.interpreter, "-m", "pytest", *spec.pytest_options, "--json-report",
            f"--json-report-file={IO_DIR}/report.json", "--continue-on-collection-errors", *spec.test_targets)


def _prepare(box: Sandbox, spec: TaskSpec, patch: bytes, overlays: dict[str, bytes]) -> Preparation:
    overlay_names = [f"overlay-{i:02d}.patch" for i in range(len(spec.overlays))]
    config = {
        "workdir": spec.workdir, "base_revision": spec.base_revision, "patch": f"{IO_DIR}/patch.diff",
        "overlays": [f"{IO_DIR}/{n}" for n in overlay_names],
        "protected_paths": sorted({*spec.protected_paths, *spec.test_targets}),
    }
    files = {"prepare.json": json.dumps(config).encode(), "patch.diff": patch,
             "prepare.py": Path(prepare_script.__file__).read_bytes()}
    files.update({name: overlays[path] for name, (path, _) in zip(overlay_names, spec.overlays)})
    setup = box.exec(f"mkdir -p {IO_DIR}", 60)
    if setup.exit_code != 0:
        raise SandboxUnavailableError(f"cannot create {IO_DIR} in {box.name}: {setup.output[-500:]!r}")
    box.write_files(files, IO_DIR)
    done = box.exec(f"{spec.interpreter} {IO_DIR}/prepare.py {IO_DIR}", 300)
    raw = box.read_file(f"{IO_DIR}/prepared.json", 10_000_000)
    if done.exit_code != 0 or raw is None:
        # Our own script failed on the image (git missing, base commit absent): the environment is at fault.
        raise SandboxUnavailableError(
            f"preparing {spec.task_id} in {box.name} failed: {done.output.decode('utf-8', 'replace')[-2000:]}"
        )
    record = json.loads(raw)
    return Preparation(
        record["patch_status"], record["patch_log"][-5000:], (), record["canonical_ref"],
        tuple(record["restored_paths"]), tuple(record["untracked_paths_removed"]),
        tuple(record["hazards_removed"]), tuple(record["changed_paths"]),
    )


def _replace(preparation: Preparation, **changes: Any) -> Preparation:
    return Preparation(**{**asdict(preparation), **changes})


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]
