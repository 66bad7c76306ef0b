"""An agent's workspace: a task container prepared by the harness at the agent's start state, where its commands
run as the unprivileged sandbox user, and from which its patch is read on the trusted side.

The container is the harness's own (`harness.evaluation.Workbench.prepared`): the task's pinned image, no network,
the run's memory, CPU, process and file-size limits, a read-only root, the work tree on a bounded tmpfs, reset to
the base revision with the overlays and the start patch applied, owned by the sandbox user (`.git` stays root's).
Each command runs under `timeout` started by root (so the command cannot end its own limit) and becomes the
sandbox user at once; the harness's watchdog kills the container if even that fails. When the agent is done, all
its processes are ended before anything of the tree is read, and the diff is made by root with git's hooks,
external diff and text conversion drivers off.

A container whose process table the agent filled (a fork bomb detached from its command) cannot start the next
command: `docker exec` or `timeout` fails to fork and the daemon answers 126 or 125, which an agent's own command
can also return. So root writes the command's number to `STARTED_FILE` before it becomes the sandbox user; a
command that exits 125 to 127 without having written it never started. Then every process of the container is
ended from outside (the container's init, `Sandbox.end_processes`, which needs no new process), the command is run
again, and its output starts with a note saying so. A command that started but failed, or printed that a fork
failed, while the container's process counter is at its limit also ends every process, and its output ends with a
note. Each recovery is recorded (`Recovery`); a command that cannot start even in the emptied container means the
workspace is lost.

A full disk (the work tree's tmpfs or the agent's /tmp, whose size limits are the run's) is found the same way: a
command whose output says a write failed for want of space has the container's filesystems measured, and a full one
has the agent's scratch removed (`disk_space`: untracked files outside its writable paths, everything under /tmp),
the agent told at the end of the command's output, the removed paths recorded (and, in the work tree, listed as
dropped from its patch). Before its patch is read, a single agent's full tree loses its scratch the same way, so
git can read the in-scope work. Each command whose result came from an exhausted container (and was not run again)
is counted: the budget spent against it.

On a task with a native build (`spec.build`), the workspace gets what each evaluated state gets
(`harness.build_tree.StateBuildTree`): a copy-on-write overlay of the image's build tree, writable here, whose
changes go to a tmpfs bounded by the run's `build_space`, mounted at the task's build folder. The agent runs the
build command there as the sandbox user, without network, under the container's limits; the task's build command
itself gets the build's time limit (`build_timeout`, else the task's own), any other command the per-command one.
Nothing it builds enters its patch: the preparation names the build folder in `.git/info/exclude`, and the diff
takes it out of the index again after `git add` (a `.gitignore` in the tree could otherwise take it back in).
"""

from __future__ import annotations

import os
import shlex
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from asyncodebench.agents import disk_space
from asyncodebench.agents.adapter import CommandResult, now
from asyncodebench.harness.build_tree import StateBuildTree
from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.sandbox import IO_DIR, OVERSIZED, SANDBOX_GID, SANDBOX_UID, Sandbox, SandboxUnavailableError
from asyncodebench.harness.workspace import GIT_CONFIG, HOME_DIR
from asyncodebench.scoring.patches import outside_scope

KILL_GRACE_SECONDS = 5
DIFF_SECONDS = 300
PATCH_CAP_BYTES = 20_000_000  # an agent's patch larger than this is not carried (a model outcome, recorded)
DIFF_FILE = f"{IO_DIR}/agent.diff"
CHANGED_FILE = f"{IO_DIR}/agent.changed"  # `git diff --name-status -z` of everything the agent changed
DROP_LIST = f"{IO_DIR}/agent.dropped"  # the paths taken out of a single agent's patch, NUL-separated
OUTSIDE_REASON = "outside the writable paths"
UNTRACKED_FILE = f"{IO_DIR}/agent.untracked"  # `git ls-files --others --exclude-standard -z` when the disk is full
STARTED_FILE = f"{IO_DIR}/command.started"  # the number of the last command that started (root's folder)
NOT_STARTED_CODES = (125, 126, 127)  # timeout's, or docker exec's, own failures (an agent's command may give them)
# Notes that the command started (its number, argv[2], when given: the in-container agents of cli_agent.py start
# one command and give none), becomes the sandbox user, then runs the command with bash (sh where the image has no
# bash). Run with -I, so nothing of the work tree or the environment is imported while it is still root. A full IO
# folder must not keep the command from running: the note is then left out.
DROP_PRIVILEGES = (
    "import os, shutil, sys\n"
    "try:\n"
    "    if len(sys.argv) > 2:\n"
    f"        with open({STARTED_FILE!r}, 'w') as handle:\n"
    "            handle.write(sys.argv[2])\n"
    "except OSError:\n"
    "    pass\n"
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


@dataclass(frozen=True)
class Recovery:
    """A time the agent's container was exhausted and made usable again: every process ended because a command
    could not start (it was then run again) or failed with the container's process counter at its limit, or the
    agent's scratch files removed because a filesystem it writes was full. Which command (1-based; the number of
    commands run so far when found as the patch was read), why (`process_limit` when the counter was at its limit,
    `not_started`, `disk_full`), the counter as the daemon gave it, when, and for a full disk the folders found full,
    the paths removed (work-tree paths relative, /tmp's absolute) and the folders still full after it."""

    command_index: int
    cause: str
    pids: int | None
    pids_limit: int | None
    at: str
    full: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    still_full: tuple[str, ...] = ()

    def to_record(self) -> dict[str, Any]:
        """The recovery as the runner's record keeps it."""
        record: dict[str, Any] = {"command_index": self.command_index, "cause": self.cause, "pids": self.pids,
                                  "pids_limit": self.pids_limit, "at": self.at}
        if self.cause == DISK_FULL:
            record.update(full=list(self.full), removed=list(self.removed[:REMOVED_KEPT]),
                          removed_count=len(self.removed), still_full=list(self.still_full))
        return record


PROCESS_LIMIT, DISK_FULL = "process_limit", "disk_full"
REMOVED_KEPT = 200  # removed paths named in a recovery's record (all are counted)
REMOVED_REASON = "removed when the agent's workspace disk was full (scratch outside the writable paths)"
DISK_NOTE = ("\n(after this command your workspace's disk was full ({full}); your scratch files were removed: "
             "{what}{left}; run the command again if it failed for want of space)")
# A counter this close to its limit is full (a tenth of it, at least 2): a bomb's shells retry their forks with
# growing pauses, so a few slots may be free for a while when the counter is read.
PIDS_HEADROOM = 2
# What a failed fork prints (EAGAIN), also when the shell's retries finally succeed and the command exits 0; it
# (or a failure) triggers the check of the container's counter, which costs a daemon call of about a second.
FORK_FAILED = "Resource temporarily unavailable"
AFTER_NOTE = ("\n(after this command your workspace's process limit was full; every process of the workspace, "
              "background ones included, was ended: run the command again if it failed for want of a process)")
RECOVERY_NOTE = ("(a new process could not start in your workspace: {why}; every process of the workspace, "
                 "background ones included, was ended, and your command was then run)\n")


def _disk_note(recovery: Recovery) -> str:
    tree = [p for p in recovery.removed if not p.startswith("/")]
    tmp = len(recovery.removed) - len(tree)
    parts = []
    if tree:
        shown = ", ".join(tree[:20]) + (f" and {len(tree) - 20} more" if len(tree) > 20 else "")
        parts.append(f"{len(tree)} file(s) outside your writable paths ({shown})")
    if tmp:
        parts.append(f"{tmp} entr(ies) under /tmp and your HOME")
    left = f"; still full: {', '.join(recovery.still_full)} (what fills it is yours to remove)" \
        if recovery.still_full else ""
    return DISK_NOTE.format(full=", ".join(recovery.full), what="; ".join(parts) or "nothing could be removed",
                            left=left)


def _full(pids: int | None, pids_limit: int | None) -> bool:
    if pids is None or pids_limit is None or pids_limit <= 0:
        return False
    return pids_limit <= pids + max(PIDS_HEADROOM, pids_limit // 10)


@dataclass(frozen=True)
class Dropped:
    """A changed path left out of the agent's patch, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class WorkspacePatch:
    """What `AgentWorkspace.patch` read: the diff kept, the changed paths outside the writable paths, those of
    them dropped from the diff (a single agent's), and why the diff could not be read (None when it could)."""

    raw: bytes
    out_of_scope: tuple[str, ...]
    dropped: tuple[Dropped, ...]
    problem: str | None


def changed_paths(name_status: bytes) -> list[tuple[str, ...]]:
    """`git diff --name-status -z` as one tuple of paths per change (two for a rename or a copy), as text the way
    `patch_text` decodes a diff."""
    fields = name_status.split(b"\0")
    changes: list[tuple[str, ...]] = []
    at = 0
    while at < len(fields) and fields[at]:
        count = 2 if fields[at][:1] in (b"R", b"C") else 1
        changes.append(tuple(f.decode("utf-8", errors="surrogateescape") for f in fields[at + 1:at + 1 + count]))
        at += 1 + count
    return changes


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
        self.commands = 0  # commands run so far
        self.recoveries: list[Recovery] = []
        self.exhausted_commands = 0  # commands whose result came from an exhausted container (not run again)
        self.writable: tuple[str, ...] | None = None  # the agent's writable paths (None: no work-tree file removed)
        self.removed: list[Dropped] = []  # work-tree scratch removed when the disk was full
        self.on_recovery: Callable[[Recovery], None] | None = None  # told of each recovery as it happens

    @property
    def container_name(self) -> str:
        """The container's name, for records."""
        return self.box.name

    def execute(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run `command` as the sandbox user in the work tree under a time limit.

        A command the container cannot start (its process limit is full) ends every process of the container,
        runs the command again and says so at the start of its output; the agent may go on.

        Raises:
            WorkspaceLostError: the container is gone, or cannot start a command even once emptied (the agent's
                doing).
            SandboxUnavailableError: the daemon failed (infrastructure).
        """
        limit = max(1, int(timeout or self.command_timeout))
        if self.build is not None and command.strip() == self.build.command_line:
            limit = max(limit, self.build.timeout_seconds)
        self.commands += 1
        done = self._run(command, limit)
        if done is None:  # it never started: empty the container and run it again
            recovery = self._recover()
            done = self._run(command, limit)
            if done is None:
                raise WorkspaceLostError(f"the workspace container {self.box.name} cannot start a command even "
                                         "with every process ended; the agent's work in it is lost")
            why = "its process limit was full" if recovery.cause == PROCESS_LIMIT else "the container refused it"
            return replace(done, output=RECOVERY_NOTE.format(why=why) + done.output)
        if (done.exit_code != 0 or FORK_FAILED in done.output) and self._process_table_full():  # no room to fork
            self._recover(PROCESS_LIMIT)
            self.exhausted_commands += 1
            return replace(done, output=done.output + AFTER_NOTE)
        if disk_space.mentions_no_space(done.output):
            freed = self._free_disk(self.writable)
            if freed is not None:
                self.exhausted_commands += 1
                return replace(done, output=done.output + _disk_note(freed))
        return done

    def _free_disk(self, scope: tuple[str, ...] | None) -> Recovery | None:
        """When a filesystem the agent writes is full, remove its scratch there (`disk_space`; in the work tree the
        untracked files outside `scope`, none when it is None) and record it; None when nothing was full, or the
        container could not be measured (a command cannot start in it: the process limit's recovery is for that,
        and an agent's own text must not make it a daemon failure)."""
        folders = (self.workdir, disk_space.TMP_DIR)
        try:
            full = [s.folder for s in disk_space.measure(self.box, self.interpreter, folders) if s.full]
        except SandboxUnavailableError:
            return None
        if not full:
            return None
        paths: list[str] = []
        if self.workdir in full and scope is not None:
            git = shlex.join(["git", *GIT_SAFETY])
            if self._git(f"{git} ls-files --others --exclude-standard -z > {UNTRACKED_FILE}") is None:
                listed = self.box.read_file(UNTRACKED_FILE, PATCH_CAP_BYTES)
                if listed is not None and listed is not OVERSIZED:
                    names = [p.decode("utf-8", errors="surrogateescape") for p in listed.split(b"\0") if p]
                    paths = [p for p in names if outside_scope((p,), scope)]
        removed = disk_space.remove_scratch(self.box, self.interpreter, self.workdir, paths,
                                            disk_space.TMP_DIR in full)
        still = [s.folder for s in disk_space.measure(self.box, self.interpreter, folders) if s.full]
        self.removed += [Dropped(p, REMOVED_REASON) for p in removed if not p.startswith("/")]
        recovery = Recovery(self.commands, DISK_FULL, None, None, now(), tuple(full), tuple(removed), tuple(still))
        self.recoveries.append(recovery)
        if self.on_recovery is not None:
            self.on_recovery(recovery)
        return recovery

    def _run(self, command: str, limit: int) -> CommandResult | None:
        """The command's result, or None when it never started."""
        token = str(self.commands)
        argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), str(limit), self.interpreter, "-I", "-c", DROP_PRIVILEGES,
                command, token]
        try:
            done = self.box.exec(argv, limit + KILL_GRACE_SECONDS, env=AGENT_ENV)
        except SandboxUnavailableError:
            if not self._running():
                raise WorkspaceLostError(self._lost()) from None
            return None  # the daemon could not start it in a running container: a full process table, most likely
        if done.killed_by_watchdog or not self._running():
            raise WorkspaceLostError(self._lost())
        if done.exit_code in NOT_STARTED_CODES and self.box.read_file(STARTED_FILE, 100) != token.encode():
            return None
        timed_out = done.exit_code == 124 or (done.exit_code == 137 and done.duration_seconds >= limit)
        output = done.output.decode("utf-8", errors="replace")
        if timed_out:
            output += f"\n(the command was stopped after its time limit of {limit} s)"
        return CommandResult(output, done.exit_code, round(done.duration_seconds, 3), timed_out)

    def _recover(self, cause: str | None = None) -> Recovery:
        """End every process of the container from outside and record why."""
        pids, pids_limit = self._pids()
        self.box.end_processes()
        cause = cause or (PROCESS_LIMIT if _full(pids, pids_limit) else "not_started")
        recovery = Recovery(self.commands, cause, pids, pids_limit, now())
        self.recoveries.append(recovery)
        if self.on_recovery is not None:
            self.on_recovery(recovery)
        return recovery

    def recover_full_process_table(self) -> Recovery | None:
        """For an agent that runs its own commands (`cli_agent`): when the container's process counter is at its
        limit, end every process (the agent's own too) and record it; None when it is not full."""
        if not self._process_table_full():
            return None
        self.exhausted_commands += 1
        return self._recover(PROCESS_LIMIT)

    def _process_table_full(self) -> bool:
        return _full(*self._pids())

    def _pids(self) -> tuple[int | None, int | None]:
        """The container's process counter and limit as the daemon reports them (None where it does not)."""
        try:
            stats = self.box.client.api.stats(self.box.container.id, stream=False, one_shot=True)
        except Exception:  # the record's detail only: the recovery goes on without it
            return None, None
        counter = stats.get("pids_stats") or {}
        current, limit = counter.get("current"), counter.get("limit")
        return (current if isinstance(current, int) else None), (limit if isinstance(limit, int) else None)

    def patch(self, writable: tuple[str, ...], keep_in_scope_only: bool = False) -> WorkspacePatch:
        """Everything the agent changed in the tree since its start state, as a binary git diff (transient test
        files left out), the changed paths outside `writable`, and why the diff could not be read (None when it
        could). With `keep_in_scope_only` (a single agent), the paths outside `writable` are dropped before the
        diff is made, so the patch's size limit applies to what is kept: a huge scratch file outside the paths
        cannot cost the agent its in-scope work. A rename into or out of scope is dropped whole. Ends the agent's
        processes first.

        Raises:
            WorkspaceLostError: the container is gone.
            SandboxUnavailableError: the daemon failed.
        """
        if not self._running():
            raise WorkspaceLostError(self._lost())
        self.box.end_processes()
        # A full tree would fail git's writes: a single agent's scratch outside its paths goes (it is dropped
        # anyway); a specialist's stays, as its scope violation (it can no longer be told).
        self._free_disk(writable if keep_in_scope_only else None)
        read = self._read_patch(writable, keep_in_scope_only)
        removed = tuple(d for d in self.removed if d.path not in {k.path for k in read.dropped})
        if not removed:
            return read
        outside = tuple(dict.fromkeys((*read.out_of_scope, *(d.path for d in removed))))
        return replace(read, out_of_scope=outside, dropped=(*read.dropped, *removed))

    def _read_patch(self, writable: tuple[str, ...], keep_in_scope_only: bool) -> WorkspacePatch:
        git = shlex.join(["git", *GIT_SAFETY])
        excludes = " ".join(shlex.quote(f":(exclude,glob){p}") for p in TRANSIENT)
        # The build tree is taken out of the index again rather than excluded by pathspec: git refuses a pathspec
        # that names an ignored folder, which it is unless a .gitignore of the agent's took it back in.
        unstage_build = "" if self.build is None else \
            f"{git} reset -q HEAD -- {shlex.quote(f':(top,literal){self.build.build_dir}')} && "
        listed = self._git(f"{git} add -A -- . {excludes} && {unstage_build}"
                           f"{git} diff --cached --name-status -z HEAD > {CHANGED_FILE}")
        if isinstance(listed, str):
            return WorkspacePatch(b"", (), (), listed)
        raw_list = self.box.read_file(CHANGED_FILE, PATCH_CAP_BYTES)
        if raw_list is OVERSIZED or raw_list is None:
            return WorkspacePatch(b"", (), (), f"the list of the agent's changed paths is larger than "
                                               f"{PATCH_CAP_BYTES} bytes")
        changes = changed_paths(raw_list)
        outside = tuple(dict.fromkeys(p for paths in changes for p in outside_scope(paths, writable)))
        dropped: tuple[Dropped, ...] = ()
        if keep_in_scope_only and outside:
            gone = [p for paths in changes if outside_scope(paths, writable) for p in paths]
            dropped = tuple(Dropped(p, OUTSIDE_REASON) for p in outside)
            self.box.write_files({DROP_LIST.rsplit("/", 1)[1]: b"".join(
                os.fsencode(p) + b"\0" for p in dict.fromkeys(gone))}, IO_DIR)
            unstaged = self._git(f"GIT_LITERAL_PATHSPECS=1 {git} reset -q HEAD --pathspec-from-file={DROP_LIST} "
                                 "--pathspec-file-nul")
            if isinstance(unstaged, str):
                return WorkspacePatch(b"", outside, dropped, unstaged)
        made = self._git(f"{git} diff --cached --binary --no-textconv --no-ext-diff HEAD > {DIFF_FILE}")
        if isinstance(made, str):
            return WorkspacePatch(b"", outside, dropped, made)
        raw = self.box.read_file(DIFF_FILE, PATCH_CAP_BYTES)
        if raw is OVERSIZED:
            kept = "in-scope patch" if keep_in_scope_only else "patch"
            return WorkspacePatch(b"", outside, dropped, f"the agent's {kept} is larger than {PATCH_CAP_BYTES} bytes")
        return WorkspacePatch(raw or b"", outside, dropped, None)

    def _git(self, script: str) -> None | str:
        """Run `script` as root in the work tree with the trusted git configuration; why it failed, or None."""
        env = {"HOME": f"{IO_DIR}/git", "GIT_CONFIG_GLOBAL": GIT_CONFIG, "GIT_CONFIG_NOSYSTEM": "1"}
        done = self.box.exec(["sh", "-c", f"cd {shlex.quote(self.workdir)} && {script}"], DIFF_SECONDS, env=env)
        if done.exit_code != 0:
            return f"git could not read the work tree (exit {done.exit_code}): " \
                   f"{done.output.decode('utf-8', 'replace')[-1000:]}"
        return None

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
