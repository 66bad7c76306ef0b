"""An agent's workspace: a task container prepared by the harness at the agent's start state, where its commands
run as the unprivileged sandbox user, and from which its patch is read on the trusted side.

The container is the harness's own (`harness.evaluation.Workbench.prepared`): the task's pinned image, no network,
the run's memory, CPU, process and file-size limits, a read-only root, the work tree on a bounded tmpfs, reset to
the base revision with the overlays and the start patch applied, owned by the sandbox user (`.git` stays root's).
Each command runs under `timeout` started by root (so the command cannot end its own limit) and becomes the
sandbox user at once; the harness's watchdog kills the container if even that fails. When the agent is done, all
its processes are ended before anything of the tree is read, and the diff is made by root with git's hooks,
external diff and text conversion drivers off.

On a task with a native build (`spec.build`), the workspace gets what each evaluated state gets
(`harness.build_tree.StateBuildTree`): a copy-on-write overlay of the image's build tree, writable here, whose
changes go to a tmpfs bounded by the run's `build_space`, mounted at the task's build folder. The agent runs the
build command there as the sandbox user, without network, under the container's limits; the task's build command
itself gets the build's time limit (`build_timeout`, else the task's own), any other command the per-command one.
Nothing it builds enters its patch: the preparation names the build folder in `.git/info/exclude`, and the diff
takes it out of the index again after `git add` (a `.gitignore` in the tree could otherwise take it back in).
"""

from __future__ import annotations

import shlex
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterator

from asyncodebench.agents.adapter import CommandResult
from asyncodebench.harness.build_tree import StateBuildTree
from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.sandbox import IO_DIR, OVERSIZED, SANDBOX_GID, SANDBOX_UID, Sandbox, SandboxUnavailableError
from asyncodebench.harness.workspace import GIT_CONFIG, HOME_DIR

KILL_GRACE_SECONDS = 5
DIFF_SECONDS = 300
PATCH_CAP_BYTES = 20_000_000  # an agent's patch larger than this is not carried (a model outcome, recorded)
DIFF_FILE = f"{IO_DIR}/agent.diff"
# Becomes the sandbox user, then runs the command with bash (sh where the image has no bash). Run with -I, so
# nothing of the work tree or the environment is imported while it is still root.
DROP_PRIVILEGES = (
    "import os, shutil, sys\n"
    f"os.setgroups([]); os.setgid({SANDBOX_GID}); os.setuid({SANDBOX_UID})\n"
    "shell = shutil.which('bash') or 'sh'\n"
    "os.execvp(shell, [shell, '-c', sys.argv[1]])\n"
)
AGENT_ENV = {
    "HOME": HOME_DIR, "TMPDIR": "/tmp", "PAGER": "cat", "MANPAGER": "cat", "LESS": "-R", "PIP_PROGRESS_BAR": "off",
    "TQDM_DISABLE": "1", "PYTHONDONTWRITEBYTECODE": "1",
    # `.git` is root's: without this, git refuses the sandbox user's `git status` and `git diff` as "dubious".
    "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
}
GIT_SAFETY = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.attributesFile=/dev/null",
              "-c", "core.autocrlf=false", "-c", "submodule.recurse=false")
# What running tests leaves behind (METRICS 1.2 removes the same before evaluating): never part of an artifact.
TRANSIENT = ("**/__pycache__/**", "**/*.pyc", "**/*.pyo", "**/.pytest_cache/**", "**/htmlcov/**", "**/.coverage*")


@dataclass(frozen=True)
class NativeBuildAccess:
    """A native task's build as its agent's workspace offers it: the folder mounted over the build tree, the build
    command as the agent is told it, and that command's time limit."""

    build_dir: str
    command_line: str
    timeout_seconds: int


def native_build_access(bench: Workbench) -> NativeBuildAccess | None:
    """How `bench`'s task is built in an agent's workspace (the evaluator's command and limit), or None when the
    task has no native build."""
    build = bench.spec.build
    if build is None:
        return None
    return NativeBuildAccess(build.build_dir, shlex.join(build.command),
                             bench.settings.build_timeout or build.timeout_seconds)


class WorkspaceLostError(RuntimeError):
    """The agent's container stopped (killed after outliving a limit, or emptied by the OOM killer): the agent's
    doing, and its work is gone."""


class AgentWorkspace:
    """A prepared container an agent works in. `execute` runs its commands; `patch` reads what it changed."""

    def __init__(self, box: Sandbox, interpreter: str, workdir: str, command_timeout: float,
                 build: NativeBuildAccess | None = None) -> None:
        self.box, self.interpreter, self.workdir = box, interpreter, workdir
        self.command_timeout = command_timeout
        self.build = build

    @property
    def container_name(self) -> str:
        """The container's name, for records."""
        return self.box.name

    def execute(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run `command` as the sandbox user in the work tree under a time limit.

        A command the container cannot start (its process limit is full) ends every process of the container and
        says so in its output; the agent may go on.

        Raises:
            WorkspaceLostError: the container is gone (the agent's doing).
            SandboxUnavailableError: the daemon failed (infrastructure).
        """
        limit = max(1, int(timeout or self.command_timeout))
        if self.build is not None and command.strip() == self.build.command_line:
            limit = max(limit, self.build.timeout_seconds)
        argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), str(limit), self.interpreter, "-I", "-c", DROP_PRIVILEGES,
                command]
        try:
            done = self.box.exec(argv, limit + KILL_GRACE_SECONDS, env=AGENT_ENV)
        except SandboxUnavailableError:
            if not self._running():
                raise WorkspaceLostError(self._lost()) from None
            self.box.end_processes()  # e.g. a fork bomb holds the process limit: no new process can start
            return CommandResult("the command could not be started (the workspace's process limit was full, most "
                                 "likely); every process of the workspace was ended", None, 0.0, False)
        if done.killed_by_watchdog or not self._running():
            raise WorkspaceLostError(self._lost())
        timed_out = done.exit_code == 124 or (done.exit_code == 137 and done.duration_seconds >= limit)
        output = done.output.decode("utf-8", errors="replace")
        if timed_out:
            output += f"\n(the command was stopped after its time limit of {limit} s)"
        return CommandResult(output, done.exit_code, round(done.duration_seconds, 3), timed_out)

    def patch(self) -> tuple[bytes, str | None]:
        """Everything the agent changed in the tree since its start state, as a binary git diff (transient test
        files left out), and why it could not be read (None when it could). Ends the agent's processes first.

        Raises:
            WorkspaceLostError: the container is gone.
            SandboxUnavailableError: the daemon failed.
        """
        if not self._running():
            raise WorkspaceLostError(self._lost())
        self.box.end_processes()
        git = shlex.join(["git", *GIT_SAFETY])
        excludes = " ".join(shlex.quote(f":(exclude,glob){p}") for p in TRANSIENT)
        # The build tree is taken out of the index again rather than excluded by pathspec: git refuses a pathspec
        # that names an ignored folder, which it is unless a .gitignore of the agent's took it back in.
        unstage_build = "" if self.build is None else \
            f"{git} reset -q HEAD -- {shlex.quote(f':(top,literal){self.build.build_dir}')} && "
        script = (f"cd {shlex.quote(self.workdir)} && {git} add -A -- . {excludes} && {unstage_build}"
                  f"{git} diff --cached --binary --no-textconv --no-ext-diff HEAD > {DIFF_FILE}")
        env = {"HOME": f"{IO_DIR}/git", "GIT_CONFIG_GLOBAL": GIT_CONFIG, "GIT_CONFIG_NOSYSTEM": "1"}
        done = self.box.exec(["sh", "-c", script], DIFF_SECONDS, env=env)
        if done.exit_code != 0:
            return b"", f"git could not read the work tree (exit {done.exit_code}): " \
                        f"{done.output.decode('utf-8', 'replace')[-1000:]}"
        raw = self.box.read_file(DIFF_FILE, PATCH_CAP_BYTES)
        if raw is OVERSIZED:
            return b"", f"the agent's patch is larger than {PATCH_CAP_BYTES} bytes"
        return raw or b"", None

    def _running(self) -> bool:
        try:
            self.box.container.reload()
        except Exception:  # gone, or the daemon does not answer: either way not running for us
            return False
        return bool((self.box.container.attrs.get("State") or {}).get("Running"))

    def _lost(self) -> str:
        cause = "its memory limit (the OOM killer)" if self.box.stopped_by_oom_killer() else "a command outliving " \
            "its time limit, or the container's limits"
        return f"the workspace container {self.box.name} stopped ({cause}); the agent's work in it is lost"


@contextmanager
def agent_workspace(bench: Workbench, start_patch: bytes, command_timeout: float) -> Iterator[AgentWorkspace]:
    """A container of the task at `start_patch` (cumulative against the base), removed when the block ends.

    Raises:
        SandboxUnavailableError: the container could not be made, or the start state did not apply (the runner's
            own states always apply, so that is never the agent's doing).
    """
    build = native_build_access(bench)
    with ExitStack() as stack:
        mount = None
        if build is not None:  # the state's own writable overlay of the image's build tree, as a build gets
            tree = stack.enter_context(StateBuildTree(bench.client, bench.spec.pinned_ref, bench.run_id, bench.base,
                                                      build.build_dir, bench.settings.limits.build_space))
            mount = (tree.volume, build.build_dir, False)
        box, preparation = stack.enter_context(bench.prepared(start_patch, mount))
        if not preparation.usable:
            raise SandboxUnavailableError(
                f"the agent's start state of {bench.spec.task_id} could not be prepared ({preparation.patch_status}): "
                f"{preparation.patch_log[-1000:]}")
        yield AgentWorkspace(box, bench.spec.interpreter, bench.spec.workdir, command_timeout, build)
