"""Build a state's native code before its evaluator and probes run (METRICS decision 13).

The build is evaluated code: the patch controls its inputs (sources, CMake files), so it runs as the sandbox user,
with no network, under the run's limits and its own time limit, in a prepared container of its own whose work tree
is discarded afterwards. Only its build tree (`build_tree.StateBuildTree`) outlives it, mounted read-only into the
state's evaluator and probe containers. Whatever the build does is a model outcome: a build that fails, is killed
or runs out of time is `build_failed`, scored 0. Only a timeout is first tried again, in a fresh container with
twice the limit (`harness/retry.py`, METRICS decision 16): a loaded machine can slow an honest build past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asyncodebench.harness.sandbox import SANDBOX_GID, SANDBOX_UID, Sandbox
from asyncodebench.harness.workspace import HOME_DIR, KILL_GRACE_SECONDS, stopped_by_timeout

OUTPUT_TAIL_CHARS = 4000  # of the build's output, kept in the result (METRICS keeps 4000 of test output too)
# `timeout` stays root's; the build becomes the sandbox user before it starts (standard library only).
BECOME_SANDBOX_USER = ("import os, sys; os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[1])); "
                       "os.execvp(sys.argv[3], sys.argv[3:])")


@dataclass(frozen=True)
class BuildRun:
    """What one state's build did."""

    command: tuple[str, ...]
    exit_code: int | None  # from the daemon (the `timeout` wrapper's status); None when the watchdog killed it
    seconds: float
    timed_out: bool
    output_tail: str
    attempts: int = 1  # builds of this state: a second one, in a fresh container, after a timeout (harness/retry.py)
    limits: tuple[int, ...] = ()  # the wall-clock limit (seconds) of each build, in order

    @property
    def succeeded(self) -> bool:
        """Whether the state may be evaluated: the build ended by itself with exit code 0."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def status(self) -> str:
        """`built`, `timed_out` or `failed` (a non-zero exit, a signal, the container killed)."""
        return "built" if self.succeeded else "timed_out" if self.timed_out else "failed"

    def to_json(self) -> dict[str, Any]:
        """The record a checkpoint keeps as `source_build`, and the result as `build.final`."""
        return {"status": self.status, "command": list(self.command), "exit_code": self.exit_code,
                "seconds": self.seconds, "timed_out": self.timed_out, "output_tail": self.output_tail,
                "attempts": self.attempts, "limits_seconds": list(self.limits)}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> BuildRun:
        """Read back what `to_json` wrote (records from before the retry have one attempt and no limits)."""
        return cls(tuple(value["command"]), value["exit_code"], value["seconds"], value["timed_out"],
                   value["output_tail"], value.get("attempts", 1), tuple(value.get("limits_seconds", ())))


def run_build(box: Sandbox, interpreter: str, command: tuple[str, ...], seconds: int) -> BuildRun:
    """Run `command` in the prepared work tree as the sandbox user under `timeout`, then end every process it left.

    Raises:
        SandboxUnavailableError: the daemon failed (never because of what the build did).
    """
    argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), str(seconds), interpreter, "-I", "-c", BECOME_SANDBOX_USER,
            str(SANDBOX_UID), str(SANDBOX_GID), *command]
    done = box.exec(argv, seconds + KILL_GRACE_SECONDS, env={"HOME": HOME_DIR, "TMPDIR": "/tmp"})
    if not done.killed_by_watchdog:
        box.end_processes()  # nothing the build started writes to its tree once the state's tests read it
    timed_out = done.killed_by_watchdog or stopped_by_timeout(done.exit_code, done.duration_seconds, seconds)
    tail = done.output.decode("utf-8", errors="replace")[-OUTPUT_TAIL_CHARS:]
    return BuildRun(command, done.exit_code, round(done.duration_seconds, 3), timed_out, tail, limits=(seconds,))
