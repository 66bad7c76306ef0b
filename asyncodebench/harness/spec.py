"""`TaskSpec`: everything the harness needs about one task, built from its published rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asyncodebench.dataset.native_builds import NativeBuild, native_build
from asyncodebench.dataset.targets import target_files
from asyncodebench.scoring.checkpoints import probe_selectors
from asyncodebench.scoring.dependency import DependencyPoint

# Options of pytest that take the next token as their value (METRICS section 1.1).
VALUE_OPTIONS = {
    "-o", "-p", "-k", "-m", "--basetemp", "--capture", "--confcutdir", "--deselect", "--durations",
    "--durations-min", "--ignore", "--ignore-glob", "--junitxml", "--maxfail", "--rootdir", "--tb",
}
DEFAULT_WORKDIR = "/testbed"
COUNT_KEYS = ("collected", "passed", "failed", "errors", "skipped")


@dataclass(frozen=True)
class Agent:
    """One specialist: who may write what."""

    agent_id: str
    writable_paths: tuple[str, ...]


@dataclass(frozen=True)
class TaskSpec:
    """A task as the harness runs it."""

    task_id: str
    repo: str
    base_revision: str
    image: str
    pinned_ref: str
    workdir: str
    interpreter: str  # the evaluator's Python, e.g. `python` or `python3.10`
    pytest_options: tuple[str, ...]
    test_targets: tuple[str, ...]  # what the evaluator runs (files or folders)
    protected_paths: tuple[str, ...]  # restored from the base before grading: the task's test targets
    overlays: tuple[tuple[str, str], ...]  # (path, sha256) of upstream overlay patches
    expected_total: int | None
    initial_counts: tuple[dict[str, int], ...]  # recorded counts of the base state (public_initial_state snapshots)
    single_agent_paths: tuple[str, ...]
    specialists: tuple[Agent, ...]
    dependencies: tuple[DependencyPoint, ...]
    image_provenance: str = "official"  # "rebuilt" when an image map replaced the row's image (images/image_map)
    build: NativeBuild | None = None  # the native build run before each state is evaluated (data/native_builds.yaml)

    @property
    def selectors(self) -> tuple[str, ...]:
        """Every probe selector of the task, sorted (the set S of METRICS section 0.1)."""
        return tuple(probe_selectors(self.dependencies))

    @classmethod
    def from_rows(cls, task: dict[str, Any], dependencies: list[dict[str, Any]]) -> TaskSpec:
        """The spec of a `tasks` row, with its own rows among `dependencies` (other tasks' rows are skipped)."""
        interpreter, options, targets = split_evaluator_command(task["evaluator_command"])
        return cls(
            task_id=task["task_id"], repo=task["repo"], base_revision=task["base_revision"],
            image=task["container_image"], pinned_ref=task["container_pinned_ref"],
            workdir=DEFAULT_WORKDIR, interpreter=interpreter, pytest_options=options,
            test_targets=targets, protected_paths=target_files(task["test_targets"]),
            overlays=tuple((o["path"], o["sha256"]) for o in task["overlays"]),
            expected_total=expected_total(task["expected_test_counts"]),
            initial_counts=tuple({k: s[k] for k in COUNT_KEYS} for s in task["expected_test_counts"]
                                 if s["evidence_scope"] == "public_initial_state"),
            single_agent_paths=tuple(task["single_agent_writable_paths"]),
            specialists=tuple(Agent(a["agent_id"], tuple(a["writable_paths"])) for a in task["specialists"]),
            dependencies=tuple(DependencyPoint.from_row(d) for d in dependencies if d["task_id"] == task["task_id"]),
            build=native_build(task["task_id"]),
        )


def split_evaluator_command(argv: list[str]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Split `python -m pytest <options> <targets>` into interpreter, options and targets (METRICS 1.1).

    Raises:
        ValueError: the command does not run pytest.
    """
    if "pytest" not in argv:
        raise ValueError(f"the evaluator command {argv} does not run pytest")
    interpreter = argv[0] if argv[0] != "pytest" else "python"
    tokens = argv[argv.index("pytest") + 1:]
    options: list[str] = []
    targets: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            targets += tokens[i + 1:]
            break
        if token in VALUE_OPTIONS and i + 1 < len(tokens):
            options += [token, tokens[i + 1]]
            i += 2
            continue
        if token.startswith("-"):
            options.append(token)
        elif token != "addopts=":
            targets.append(token)
        i += 1
    return interpreter, tuple(options), tuple(targets or ["tests/"])


def expected_total(snapshots: list[dict[str, Any]]) -> int | None:
    """The number of tests the full evaluator collects, from the release's sanity snapshot (None if unknown)."""
    sanity = [s for s in snapshots if s["evidence_scope"] == "evaluator_sanity_only" and s["collected"] > 0]
    return sanity[-1]["collected"] if sanity else None
