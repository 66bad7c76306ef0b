"""Evaluate one patch of one task in fresh containers and collect the raw evidence.

Every pytest process starts from image + base + overlays + its state's patch in a container of its own: the final
evaluator, the final state's probes, and each intermediate checkpoint state's probes (when agents' patches are
given, a trusted-only container first merges them and derives those states). For a task with a native build
(`spec.build`), each state is first built once, in a container of its own, and its build tree is mounted read-only
into that state's pytest containers (`native`, `build_tree`). Steps are independent, so two run at a time. Only raw
facts come back here; grading them is `grading`'s job, so saved evidence can be regraded without containers.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator

from asyncodebench.dataset.targets import target_files
from asyncodebench.harness.build_tree import StateBuildTree, check_base_build_tree
from asyncodebench.harness.integration import SERIAL_PROTOCOLS, AgentArtifact, Integration, integration_from_record
from asyncodebench.harness.native import BuildRun, run_build
from asyncodebench.harness.probes import ProbeRun, run_probes
from asyncodebench.harness.retry import TRIES, next_limit
from asyncodebench.harness.sandbox import IO_DIR, Limits, Sandbox, SandboxUnavailableError, base_volume
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.harness.workspace import (
    Preparation,
    PytestRun,
    prepare,
    prepare_inputs,
    run_pytest,
    stopped_by_timeout,
)
from asyncodebench.scoring.patches import patch_bytes, touched_paths
from asyncodebench.scoring.tampering import examine

STEPS_AT_ONCE = 2  # containers one prediction runs at the same time
INTEGRATED_RECORD_CAP_BYTES = 200_000_000


@dataclass(frozen=True)
class Settings:
    """How evaluations run. Defaults are the official profile's limits."""

    timeout: int = 900  # seconds for the evaluator (official: 900)
    probe_timeout: int = 60  # seconds per probe selector (official: 60)
    run_probes: bool = True
    limits: Limits = field(default_factory=Limits)
    build_timeout: int | None = None  # seconds per native build (None: the task's own default)

    def to_record(self) -> dict[str, Any]:
        """The settings as a run folder records them (its `settings.json`; the report's `run.settings`)."""
        return {"run_probes": self.run_probes, "timeout_seconds": self.timeout,
                "probe_timeout_seconds": self.probe_timeout, "limits": asdict(self.limits),
                "build_timeout_seconds": self.build_timeout}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Settings:
        """The settings `to_record` wrote (keys beyond them, such as a report's own, are ignored); a limit the record
        predates takes its default."""
        return cls(record["timeout_seconds"], record["probe_timeout_seconds"], record["run_probes"],
                   Limits(**record["limits"]), record.get("build_timeout_seconds"))


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
    build: BuildRun | None = None  # the state's native build; None for a task without one, or a patch never applied


@dataclass(frozen=True)
class BuiltState:
    """A state of a task with a native build, built once: its build tree's volume and what the build did."""

    volume: str
    build_dir: str
    preparation: Preparation  # of the build's container (the same patch, so the same outcome as the state's own)
    run: BuildRun | None  # None when the patch never reached the code (nothing was built)

    @property
    def ready(self) -> bool:
        """Whether the state's evaluator and probes may run: it was built, and the build succeeded."""
        return self.run is not None and self.run.succeeded

    @property
    def mount(self) -> tuple[str, str, bool]:
        """The build tree as a pytest container mounts it: read only."""
        return self.volume, self.build_dir, True


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
    report_problem: str | None = None  # why the report is missing or unreadable (a model outcome)
    sentinel: str | None = None  # the evaluator's sentinel secret (scoring/tampering.py)
    build: BuildRun | None = None  # the final state's native build (None: the task has none, or nothing was built)
    output_capped: bool = False  # the evaluator's output was longer than the kept tail
    attempts: int = 1  # evaluator runs: two when a loaded machine may have decided the first (`Workbench.pytest`)
    limits: tuple[int, ...] = ()  # the evaluator's wall-clock limit (seconds) in each run (harness/retry.py)

    def execution_record(self) -> dict[str, Any]:
        """Everything but the bulky output, report and probe runs, as saved in `execution.json`."""
        record = asdict(self)
        for bulky in ("output", "report", "probes", "states"):
            record.pop(bulky)
        record["build"] = self.build.to_json() if self.build is not None else None  # as the states file keeps it
        return record


@dataclass(frozen=True)
class Workbench:
    """Opens prepared containers of one task: the image, the run, the limits and the overlays."""

    client: Any
    spec: TaskSpec
    run_id: str
    settings: Settings
    overlays: tuple[tuple[str, bytes], ...]
    base: str  # the run's volume holding the image's own work tree

    @classmethod
    def open(cls, client: Any, spec: TaskSpec, run_id: str, settings: Settings,
             overlays: dict[str, bytes]) -> Workbench:
        """A workbench for `spec`'s task, its overlays in the task's order, with the run's base volume made."""
        ordered = tuple((path, overlays[path]) for path, _ in spec.overlays)
        build = spec.build
        check = None if build is None else (lambda name: check_base_build_tree(
            client, spec.pinned_ref, run_id, name, spec.workdir, build.build_dir, build.command))
        return cls(client, spec, run_id, settings, ordered, base_volume(client, spec.pinned_ref, run_id,
                                                                          spec.workdir, on_create=check))

    def sandbox(self, build_tree: tuple[str, str, bool] | None = None) -> Sandbox:
        """A new running container of the task's pinned image under the run's limits; removed when its `with` ends.
        `build_tree`: a state's build tree to mount (volume, folder, read only)."""
        return Sandbox(self.client, self.spec.pinned_ref, self.run_id, self.settings.limits, self.spec.workdir,
                       self.base, self.spec.interpreter, build_tree)

    def inputs(self, patch: bytes, report_folder: bool = True) -> dict[str, bytes]:
        """The preparation's files for the state `patch` makes, the task's test targets among the protected paths
        (`report_folder`: whether a pytest report will be written; not for a build)."""
        spec = self.spec
        protected = (*spec.protected_paths, *spec.test_targets)
        return prepare_inputs(spec.workdir, spec.base_revision, spec.interpreter, protected, list(self.overlays),
                              patch, build_dir=spec.build.build_dir if spec.build else None,
                              report_folder=report_folder)

    @contextmanager
    def prepared(self, patch: bytes, build_tree: tuple[str, str, bool] | None = None, for_build: bool = False
                 ) -> Iterator[tuple[Sandbox, Preparation]]:
        """A fresh container whose work tree holds this state; a patch naming unsafe paths is not applied.

        The native build tree is the harness's: a patch naming a path in it is unsafe too (the build writes there).
        """
        touched = touched_paths(patch.decode("utf-8", errors="surrogateescape"))
        unsafe = touched.unsafe
        if self.spec.build is not None:
            folder = self.spec.build.build_dir
            unsafe += tuple(p for p in touched.paths if p == folder or p.startswith(f"{folder}/"))
        with self.sandbox(build_tree) as box:
            box.write_files(self.inputs(b"" if unsafe else patch, report_folder=not for_build), IO_DIR)
            preparation = prepare(box, self.spec.interpreter, self.spec.task_id)
            if unsafe:
                preparation = replace(preparation, patch_status="unsafe_paths", unsafe_paths=unsafe)
            yield box, preparation

    @contextmanager
    def built(self, patch: bytes) -> Iterator[BuiltState | None]:
        """For a task with a native build, this state built (its build tree lives inside `with`); else None. A build
        that timed out is built once more with twice the limit, and the second build stands (`harness/retry.py`)."""
        build = self.spec.build
        if build is None:
            yield None
            return
        limit = self.settings.build_timeout or build.timeout_seconds
        limits: list[int] = []
        for attempt in range(1, TRIES + 1):
            # A build that timed out is built again from scratch: a fresh container and a fresh build tree.
            with StateBuildTree(self.client, self.spec.pinned_ref, self.run_id, self.base, build.build_dir,
                                self.settings.limits.build_space) as tree:
                with self.prepared(patch, (tree.volume, build.build_dir, False), for_build=True) as (box, preparation):
                    run = run_build(box, self.spec.interpreter, build.command, limit) if preparation.usable else None
                limits.append(limit)
                if run is not None:
                    run = replace(run, attempts=attempt, limits=tuple(limits))
                again = None if run is None or attempt == TRIES else next_limit(limit, run.timed_out)
                if again is None:
                    yield BuiltState(tree.volume, build.build_dir, preparation, run)
                    return
            limit = again
        raise AssertionError("unreachable: the last attempt yields")

    def evaluate(self, patch: bytes, built: BuiltState | None = None) -> tuple[Preparation, PytestRun | None]:
        """The evaluator on this state, or only the preparation when the patch never reached the code or the
        state's build failed. `built` must be given for a task with a native build."""
        if built is not None and not built.ready:
            return built.preparation, None
        return self.pytest(patch, built.mount if built else None, evaluator_args(self.spec), self.settings.timeout,
                           first_path(self.spec.test_targets))

    def pytest(self, patch: bytes, mount: tuple[str, str, bool] | None, args: tuple[str, ...], seconds: int,
               near: str, preparations: list[Preparation] | None = None, retry_timeout: bool = True
               ) -> tuple[Preparation, PytestRun | None]:
        """One pytest process on this state in a fresh container (none when the patch never reached the code).

        A process whose evidence disagrees with itself in a way a loaded machine can also produce (its output's
        end lost, stopped before its session ended: `scoring.tampering`) runs once more in a new container; the
        last run is kept, and what persists is listed for review, never scored as tampering. A process that hit its
        time limit runs once more with twice the limit (`retry_timeout` False: not on a timeout), and that run
        stands (`harness/retry.py`). `preparations` collects each container's preparation.
        """
        limit, limits = seconds, []
        for attempt in range(1, TRIES + 1):
            with self.prepared(patch, mount) as (box, preparation):
                if preparations is not None:
                    preparations.append(preparation)
                if not preparation.usable:
                    return preparation, None
                run = run_pytest(box, self.spec.workdir, self.spec.interpreter, preparation.image_plugins, args,
                                 limit, near=near)
            limits.append(limit)
            run = replace(run, attempts=attempt, limits=tuple(limits))
            if attempt == TRIES:
                return preparation, run
            ambiguous = examine(run.report, run.exit_code, run.tail, run.sentinel,
                                output_capped=run.output_capped).ambiguous
            again = next_limit(limit, run.timed_out, bool(ambiguous), retry_timeout)
            if again is None:
                return preparation, run
            limit = again
        raise AssertionError("unreachable: the last attempt returns")

    def probe(self, patch: bytes, built: BuiltState | None = None) -> tuple[Preparation, ProbeRun | None]:
        """Every probe selector on this state; each pytest process gets a container of its own. A state whose
        build failed runs no probe (each one is then not passed)."""
        if built is not None and not built.ready:
            return built.preparation, None
        preparations: list[Preparation] = []
        mount = built.mount if built else None

        def execute(selectors: tuple[str, ...]) -> PytestRun | None:
            # A shared run that timed out is not retried: its selectors then run alone, each with its own retry.
            return self.pytest(patch, mount, probe_args(selectors), self.settings.probe_timeout, first_path(selectors),
                               preparations, retry_timeout=len(selectors) == 1)[1]

        probes = None
        if self.settings.run_probes:
            probes = run_probes(execute, self.spec.selectors, self.settings.probe_timeout)
        if not preparations:  # probes off, or a task without selectors: the state is still prepared and recorded
            with self.prepared(patch, mount) as (_, preparation):
                preparations.append(preparation)
        return preparations[0], probes

    def probe_state(self, patch: bytes) -> tuple[Preparation, ProbeRun | None, BuildRun | None]:
        """An intermediate state: built once (for a task with a native build), then probed."""
        with self.built(patch) as built:
            preparation, probes = self.probe(patch, built)
        return preparation, probes, built.run if built else None

    def integrate(self, protocol: str, plan: list[AgentArtifact]) -> Integration:
        """Merge agents' artifacts in a container where no evaluated code runs; read every derived state."""
        files = self.inputs(b"")
        agents = []
        for i, artifact in enumerate(plan):
            name = f"agents/{i:02d}.patch"
            if artifact.patch is not None:
                files[name] = artifact.patch
            agents.append({"agent_id": artifact.agent_id, "scope_ok": artifact.scope_ok,
                           "patch": f"{IO_DIR}/{name}" if artifact.patch is not None else None})
        files["integrate.json"] = json.dumps({"agents": agents, "serial": protocol in SERIAL_PROTOCOLS}).encode()
        with self.sandbox() as box:
            box.write_files(files, IO_DIR)
            done = box.exec(["sh", "-c", f"cd {IO_DIR} && {self.spec.interpreter} {IO_DIR}/integrate.py {IO_DIR}"],
                            600)
            raw = box.read_file(f"{IO_DIR}/integrated.json", INTEGRATED_RECORD_CAP_BYTES)
        if done.exit_code != 0 or not raw or not raw.startswith(b"{"):
            raise SandboxUnavailableError(f"integrating agent patches of {self.spec.task_id} failed: "
                                          f"{done.output.decode('utf-8', 'replace')[-2000:]}")
        return integration_from_record(protocol, plan, json.loads(raw))


def evaluate_patch(client: Any, spec: TaskSpec, patch: bytes, run_id: str, settings: Settings,
                   overlays: dict[str, bytes], states: tuple[State, ...] = (),
                   agents: tuple[str, list[AgentArtifact]] | None = None) -> Evidence:
    """Run the full procedure: [integrate agents], the final evaluator, the final probes, each state's probes.

    `agents` is (protocol, artifacts in merge order): the harness integrates them and the integrated result
    replaces `patch`; their checkpoints replace `states`.

    Raises:
        SandboxUnavailableError: the container engine failed; the prediction was not evaluated.
    """
    bench = Workbench.open(client, spec, run_id, settings, overlays)
    integration = None
    if agents is not None:
        integration = bench.integrate(agents[0], agents[1])
        states, patch = integration_states(integration), patch_bytes(integration.final_state)
    with ThreadPoolExecutor(max_workers=STEPS_AT_ONCE) as pool, bench.built(patch) as built:
        final = pool.submit(bench.evaluate, patch, built)
        final_probes = pool.submit(bench.probe, patch, built) if settings.run_probes else None
        replayed = [(state, pool.submit(bench.probe_state, state.patch)) for state in states]
        preparation, run = final.result()
        probed = final_probes.result() if final_probes is not None else None  # before the build tree goes
        probes = probed[1] if probed is not None and preparation.usable else None
        state_evidence = tuple(StateEvidence(s.checkpoint_type, s.workspace_kind, s.agent_id, *f.result())
                               for s, f in replayed)
    return replace(evidence_from(spec, preparation, run, probes, settings), states=state_evidence,
                   integration=integration, build=built.run if built else None)


def evidence_from(spec: TaskSpec, preparation: Preparation, run: PytestRun | None, probes: ProbeRun | None,
                  settings: Settings) -> Evidence:
    """The evidence of a final evaluator run; without a run (the patch never reached the code), a run with no output."""
    command = evaluator_command(spec)
    if run is None:
        # The model's patch never reached the code: nothing ran, scored against the expected total.
        return Evidence(preparation, None, False, False, 0.0, "", None, None, "", command)
    limits = run.limits or (settings.timeout,)  # runs saved before the retry knew only the settings' limit
    timed_out = run.killed_by_watchdog or stopped_by_timeout(run.exit_code, run.seconds, limits[-1])
    return Evidence(preparation, run.exit_code, timed_out, run.killed_by_watchdog, run.seconds, run.tail,
                    run.report, probes, run.container_name, command, report_problem=run.report_problem,
                    sentinel=run.sentinel, output_capped=run.output_capped, attempts=run.attempts, limits=limits)


def integration_states(integration: Integration) -> tuple[State, ...]:
    """The official checkpoint model: per agent, its artifact, then the integrated state after its merge."""
    states: list[State] = []
    for merge in integration.merges:
        states.append(State("agent_artifact", "agent_workspace", merge.agent_id, patch_bytes(merge.agent_state)))
        states.append(State("integration_after_merge", "integrated_workspace", merge.agent_id,
                            patch_bytes(merge.integrated_state)))
    return tuple(states)


def first_path(targets: tuple[str, ...]) -> str:
    """The first target that names a path of the tree (test targets may hold options such as `--deselect=...`)."""
    return next(iter(target_files(targets)), "")


def evaluator_args(spec: TaskSpec) -> tuple[str, ...]:
    """The evaluator's pytest arguments: the task's options, a JSON report, then its targets (METRICS 1.3)."""
    return (*spec.pytest_options, "--json-report", "--json-report-file={report}", "--continue-on-collection-errors",
            *spec.test_targets)


def probe_args(selectors: tuple[str, ...]) -> tuple[str, ...]:
    """A probe process's pytest arguments: plain pytest with a JSON report, not the evaluator's flags (METRICS 0.1)."""
    return ("--json-report", "--json-report-file={report}", "--continue-on-collection-errors", *selectors)


def evaluator_command(spec: TaskSpec) -> tuple[str, ...]:
    """The evaluator as the task states it (its pytest runs through the harness's launcher)."""
    return (spec.interpreter, "-m", "pytest", *evaluator_args(spec))


def new_run_id() -> str:
    """A fresh run id: 12 random hex digits."""
    return uuid.uuid4().hex[:12]
