"""Evaluate one patch of one task in a fresh container and collect the raw evidence.

The stages inside one container: [integrate agents' patches], then for each intermediate checkpoint state
prepare + probes, then for the final state prepare (base state, overlays, patch, restore tests, remove hazards),
the evaluator under its time limit and the dependency probes. Only raw facts come back here;
grading them is `grading`'s job, so saved evidence can be regraded without containers.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from asyncodebench.integration import AgentArtifact, Integration, integrate
from asyncodebench.patches import patch_bytes, touched_paths
from asyncodebench.probes import ProbeRun, run_probes
from asyncodebench.sandbox import Limits, Sandbox, SandboxUnavailableError
from asyncodebench.spec import TaskSpec
from asyncodebench.workspace import (
    IO_DIR, KILL_GRACE_SECONDS, CommandOutput, command_dir, read_output, script_bytes, stopped_by_timeout, timed_shell,
)


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
class State:
    """A workspace state to probe before the final one: a cumulative patch against the base (METRICS 0)."""

    checkpoint_type: str  # agent_artifact | integration_after_merge | manager_integration
    workspace_kind: str  # agent_workspace | integrated_workspace
    agent_id: str | None
    patch: bytes


@dataclass(frozen=True)
class StateEvidence:
    """What the probes saw in one intermediate state."""

    checkpoint_type: str
    workspace_kind: str
    agent_id: str | None
    preparation: Preparation
    probes: ProbeRun | None


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
    states: tuple[StateEvidence, ...] = ()  # intermediate checkpoints, in order
    integration: Integration | None = None  # how agent patches were merged, when they were given

    def execution_record(self) -> dict[str, Any]:
        """Everything but the bulky output, report and probe runs, as saved in `execution.json`."""
        record = asdict(self)
        for bulky in ("output", "report", "probes", "states"):
            record.pop(bulky)
        return record


def evaluate_patch(client: Any, spec: TaskSpec, patch: bytes, run_id: str, settings: Settings,
                   overlays: dict[str, bytes], states: tuple[State, ...] = (),
                   agents: tuple[str, list[AgentArtifact]] | None = None) -> Evidence:
    """Run the full procedure in one container: [integrate agents], probe each state, then the final state.

    `agents` is (protocol, artifacts in merge order): the harness integrates them and the integrated result
    replaces `patch`; their checkpoints replace `states`.

    Raises:
        SandboxUnavailableError: the container engine failed; the prediction was not evaluated.
    """
    with Sandbox(client, spec.pinned_ref, run_id, settings.limits, spec.workdir) as box:
        overlay_names = copy_inputs(box, spec, overlays)
        integration = None
        if agents is not None:
            integration = integrate(box, spec, agents[0], agents[1], [f"{IO_DIR}/{n}" for n in overlay_names])
            states, patch = integration_states(integration), patch_bytes(integration.final_state)
        replayed = tuple(probe_state(box, spec, state, settings) for state in states)
        evidence = _evaluate_final(box, spec, patch, settings)
        return replace(evidence, states=replayed, integration=integration)


def integration_states(integration: Integration) -> tuple[State, ...]:
    """The official checkpoint model: per agent, its artifact, then the integrated state after its merge."""
    states: list[State] = []
    for merge in integration.merges:
        states.append(State("agent_artifact", "agent_workspace", merge.agent_id, patch_bytes(merge.agent_state)))
        states.append(State("integration_after_merge", "integrated_workspace", merge.agent_id,
                            patch_bytes(merge.integrated_state)))
    return tuple(states)


def probe_state(box: Sandbox, spec: TaskSpec, state: State, settings: Settings) -> StateEvidence:
    preparation = _prepare_checked(box, spec, state.patch)
    usable = preparation.patch_status not in ("failed", "unsafe_paths")
    probes = run_probes(box, spec, settings.probe_timeout) if usable and settings.run_probes else None
    return StateEvidence(state.checkpoint_type, state.workspace_kind, state.agent_id, preparation, probes)


def _prepare_checked(box: Sandbox, spec: TaskSpec, patch: bytes) -> Preparation:
    """Prepare the workspace, refusing (without applying) a patch that names paths outside the repository."""
    paths = touched_paths(patch.decode("utf-8", errors="surrogateescape"))
    preparation = _prepare(box, spec, b"" if paths.unsafe else patch)
    if paths.unsafe:
        preparation = replace(preparation, patch_status="unsafe_paths", unsafe_paths=paths.unsafe)
    return preparation


def _evaluate_final(box: Sandbox, spec: TaskSpec, patch: bytes, settings: Settings) -> Evidence:
    preparation = _prepare_checked(box, spec, patch)
    command = evaluator_command(spec)
    if preparation.patch_status in ("failed", "unsafe_paths"):
        # The model's patch never reached the code: nothing to run, scored against the expected total.
        return Evidence(preparation, None, False, False, 0.0, "", None, None, box.name, command)
    script = timed_shell(spec.workdir, command, settings.timeout, "evaluator")
    run = box.exec(script, settings.timeout + KILL_GRACE_SECONDS)
    out = CommandOutput(None, "", None) if run.killed_by_watchdog else read_output(box, "evaluator")
    exit_code, output, report = out.exit_code, out.tail, out.report
    timed_out = run.killed_by_watchdog or stopped_by_timeout(exit_code, run.duration_seconds, settings.timeout)
    # A container the watchdog killed is gone: its probes cannot run and count as not passed.
    wanted = settings.run_probes and not run.killed_by_watchdog
    probes = run_probes(box, spec, settings.probe_timeout) if wanted else None
    return Evidence(preparation, exit_code, timed_out, run.killed_by_watchdog, round(run.duration_seconds, 3),
                    output, report, probes, box.name, command)


def evaluator_command(spec: TaskSpec) -> tuple[str, ...]:
    """The evaluator as it runs: the task's pytest options, a JSON report, then its targets (METRICS 1.3)."""
    return (spec.interpreter, "-m", "pytest", *spec.pytest_options, "--json-report",
            f"--json-report-file={command_dir('evaluator')}/report.json", "--continue-on-collection-errors",
            *spec.test_targets)


def copy_inputs(box: Sandbox, spec: TaskSpec, overlays: dict[str, bytes]) -> list[str]:
    """Copy the preparation script, its settings and the overlays in, in one archive; return the overlays' names."""
    overlay_names = [f"overlay-{i:02d}.patch" for i in range(len(spec.overlays))]
    config = {
        "workdir": spec.workdir, "base_revision": spec.base_revision, "patch": f"{IO_DIR}/patch.diff",
        "overlays": [f"{IO_DIR}/{n}" for n in overlay_names],
        "protected_paths": sorted({*spec.protected_paths, *spec.test_targets}),
    }
    files = {"prepare.py": script_bytes("prepare.py"), "prepare.json": json.dumps(config).encode()}
    files.update({name: overlays[path] for name, (path, _) in zip(overlay_names, spec.overlays)})
    box.write_files({f"{IO_DIR.strip('/')}/{name}": data for name, data in files.items()}, "/")
    return overlay_names


def _prepare(box: Sandbox, spec: TaskSpec, patch: bytes) -> Preparation:
    """Reset to the base, apply overlays and the patch, protect grading; read the record before any code runs."""
    box.write_files({"patch.diff": patch}, IO_DIR)
    done = box.exec(f"{spec.interpreter} {IO_DIR}/prepare.py {IO_DIR}", 300)
    text = done.output.decode("utf-8", "replace")
    last = text.strip().rsplit("\n", 1)[-1]
    if done.exit_code != 0 or not last.startswith("{"):
        # Our own script failed on the image (git missing, base commit absent): the environment is at fault.
        raise SandboxUnavailableError(f"preparing {spec.task_id} in {box.name} failed: {text[-2000:]}")
    record = json.loads(last)
    return Preparation(
        record["patch_status"], record["patch_log"][-5000:], (), record["canonical_ref"],
        tuple(record["restored_paths"]), tuple(record["untracked_paths_removed"]),
        tuple(record["hazards_removed"]), tuple(record["changed_paths"]),
    )


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]
