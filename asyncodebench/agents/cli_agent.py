"""Agents that run as a command inside the task's container (an OpenHands-style CLI), their model calls carried out
through the host.

The container keeps no network. The agent's command is started by the relay bridge (`incontainer/relay_bridge.py`),
which serves an OpenAI-compatible endpoint on the container's own loopback (OPENAI_BASE_URL) and carries each
request over its stdin and stdout, attached to this process through the Docker API (an exec with stdin). No mount,
socket or device is added to the container. On the host, a `relay.ModelRelay` answers each request: it forwards it
to the agent's model endpoint with the key (which never enters the container), counts responses against the
budget, refuses once it is spent, and writes the trajectory. The whole run is one process tree started by root
under `timeout` (so the agent cannot end its own limit) that becomes the sandbox user at once, as every agent
command does (`container.AgentWorkspace.execute`); a host watchdog kills the container if even that fails.

How a run ended is decided on the trusted side: the relay's refusal of a request over budget is `iteration_limit`
whatever the agent says; otherwise the agent's exit code is mapped by the adapter's `exit_reasons` (the agent's own
word, as mini-swe-agent's submit is). A model call the endpoint failed for good (after the model client's retries:
unreachable, timed out, 5xx, a refused key) makes the run `provider_or_transport_error`, invalid, whatever the agent
did next; an answer to a request the agent shaped itself (400: bad parameters, a prompt over the context window)
counts against the agent (`execution_error`), so an agent cannot make itself an infrastructure error.

An agent that fills its container's process table (a fork bomb left running) cannot start its next command, and
the agent's own process usually fails with it. When the agent asks the model after a command whose output says a
fork failed, or its process tree ends without finishing, and the container's process counter is at its limit, every
process of the container is ended (the agent's too: nothing else can end a bomb without a new process), recorded as
a recovery, and the agent started again in the same tree, its instruction ending with a note that says so; its budget
and time go on (at most MAX_RESTARTS times).
"""

from __future__ import annotations

import collections
import json
import shlex
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable

from asyncodebench.agents.adapter import (
    AGENT_FINISH,
    COST_LIMIT,
    EXECUTION_ERROR,
    ITERATION_LIMIT,
    STUCK_DETECTED,
    WALL_CLOCK_TIMEOUT,
    AgentRun,
    AgentSpec,
    Usage,
    Workspace,
    now,
)
from asyncodebench.agents.container import (
    AGENT_ENV,
    DROP_PRIVILEGES,
    FORK_FAILED,
    KILL_GRACE_SECONDS,
    AgentWorkspace,
)
from asyncodebench.agents.model_client import BAD_REQUEST, CONTEXT_WINDOW, TOOLS_UNSUPPORTED
from asyncodebench.agents.relay import ModelRelay
from asyncodebench.agents.trajectory import TrajectoryWriter
from asyncodebench.harness.sandbox import IO_DIR, WATCHDOG_MARGIN_SECONDS, SandboxUnavailableError

AGENT_DIR = f"{IO_DIR}/agent"  # root's, read-only to the agent: the bridge, the agent's files, its instruction
INSTRUCTION = f"{AGENT_DIR}/instruction.md"
MAX_LINE_BYTES = 48 << 20  # one request line of the bridge (a 16 MiB body, JSON-escaped)
STDERR_TAIL_BYTES = 64 << 10
# The run's wall-clock limit: per model response, one command's limit and this much for the model call.
MODEL_CALL_SLACK_SECONDS, START_SLACK_SECONDS = 120, 300
AGENT_SHAPED = frozenset({BAD_REQUEST, CONTEXT_WINDOW, TOOLS_UNSUPPORTED})  # failures the agent's request caused
MAX_RESTARTS = 3
OUTPUT_SCAN_CHARS = 20_000  # of a request's last message searched for a failed fork
RESTART_NOTE = ("\n\n(Note: your previous session in this workspace was ended: its process limit was full, "
                "most likely processes you left running. Every process was ended and you were started again; the "
                "files you changed are still there, `git status` and `git diff` show them. Do not start processes "
                "that outlive your commands.)")


@dataclass
class CliAgent:
    """An `AgentAdapter` for an agent run as `argv` inside the container. `files` (name -> bytes) are copied to
    AGENT_DIR first; in `argv`, `{python}` is the task's interpreter, `{dir}` AGENT_DIR, `{instruction}` the file
    holding the agent's instruction and `{command_timeout}` the per-command limit in seconds. `exit_reasons` maps
    the agent's exit codes to termination reasons (unlisted codes: `execution_error`)."""

    name: str
    version: str
    files: dict[str, bytes]
    argv: tuple[str, ...]
    exit_reasons: dict[int, str] = field(default_factory=lambda: {0: AGENT_FINISH})

    def run(self, agent: AgentSpec, workspace: Workspace, budget: int) -> AgentRun:
        """Run the agent in `workspace` until it exits, its budget is spent or its time is up.

        Raises:
            SandboxUnavailableError: the container engine failed (infrastructure).
            TypeError: `workspace` is not a task container (`container.AgentWorkspace`).
        """
        if not isinstance(workspace, AgentWorkspace):
            raise TypeError(f"{self.name} runs inside a task container: give it a container.AgentWorkspace, not "
                            f"{type(workspace).__name__}")
        writer = TrajectoryWriter(agent.trajectory)
        started, clock = now(), time.monotonic()
        limit = int(budget * (workspace.command_timeout + MODEL_CALL_SLACK_SECONDS) + START_SLACK_SECONDS)
        if agent.model.limits.agent_seconds:
            limit = min(limit, max(1, int(agent.model.limits.agent_seconds)))
        relay = ModelRelay(agent.model, budget, writer, inbox=agent.inbox, deadline=clock + limit,
                           label=f"{agent.trajectory.parent.parent.name} {agent.agent_id}", cost=agent.cost)
        instruction, restarts = agent.instruction, 0
        try:
            while True:
                left = max(1, int(limit - (time.monotonic() - clock)))
                ended = self._session(agent, workspace, relay, left, instruction)
                if restarts >= MAX_RESTARTS or not self._recovered(ended, workspace, relay):
                    break
                restarts += 1
                instruction = agent.instruction + RESTART_NOTE
                relay.restart(RESTART_NOTE.strip())
        except SandboxUnavailableError:
            writer.close()
            raise
        reason, exit_status, detail = self._verdict(ended, relay, limit)
        usage = Usage(relay.usage.prompt_tokens, relay.usage.completion_tokens, relay.usage.responses,
                      round(time.monotonic() - clock, 3))
        run = AgentRun(agent.agent_id, reason, exit_status, reason == ITERATION_LIMIT, usage, started, now(),
                       agent.trajectory, detail, relay.client.retries, relay.client.timeouts, relay.client.cost_usd)
        writer.write("exit", exit_status=exit_status, content=ended.stderr[-4000:])
        writer.write("summary", agent=f"{self.name} {self.version}", termination_reason=reason,
                     exit_status=exit_status, iteration_cap_hit=run.iteration_cap_hit, detail=detail,
                     usage={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                            "total_tokens": usage.total_tokens, "responses": usage.responses,
                            "seconds": usage.seconds, "cost_usd": run.cost_usd})
        writer.close()
        return run

    def _recovered(self, ended: Ended, workspace: AgentWorkspace, relay: ModelRelay) -> bool:
        """Whether the session ended on a full process table that is now emptied (the agent may start again)."""
        if ended.recovered:
            return True
        if ended.lost or ended.agent_code == 0 or relay.budget_spent or relay.cost_refusals:
            return False
        return workspace.recover_full_process_table() is not None

    def _session(self, agent: AgentSpec, workspace: AgentWorkspace, relay: ModelRelay, limit: int,
                 instruction: str) -> Ended:
        box = workspace.box
        files = {f"agent/{name}": data for name, data in self.files.items()}
        files["agent/relay_bridge.py"] = _incontainer("relay_bridge.py")
        files["agent/instruction.md"] = instruction.encode()
        box.write_files(files, IO_DIR)
        values = {"python": workspace.interpreter, "dir": AGENT_DIR, "instruction": INSTRUCTION,
                  "command_timeout": str(int(workspace.command_timeout))}
        command = shlex.join([workspace.interpreter, "-I", f"{AGENT_DIR}/relay_bridge.py", "--",
                              *(part.format(**values) for part in self.argv)])
        argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), str(limit), workspace.interpreter, "-I", "-c",
                DROP_PRIVILEGES, command]
        return attach(box, argv, workspace.workdir, limit + KILL_GRACE_SECONDS + WATCHDOG_MARGIN_SECONDS, relay,
                      lambda body: _fork_failed(body) and workspace.recover_full_process_table() is not None)

    def _verdict(self, ended: Ended, relay: ModelRelay, limit: int) -> tuple[str, str, str]:
        """(termination reason, exit status, detail), the trusted facts first."""
        if ended.lost:
            return EXECUTION_ERROR, "WorkspaceLost", ended.lost
        if relay.budget_spent:
            return ITERATION_LIMIT, "BudgetExhausted", ""
        if relay.cost_refusals:
            return COST_LIMIT, "CostLimitReached", relay.cost_refusals[-1]
        if ended.exec_code in (124, 137) and ended.agent_code is None:
            return WALL_CLOCK_TIMEOUT, "TimeExceeded", f"the agent ran longer than its limit of {limit} s"
        status = f"exit {ended.agent_code}"
        endpoint_failures = [f for f in relay.failures if f.failure.kind not in AGENT_SHAPED]
        if endpoint_failures:  # the endpoint itself failed: whatever the agent made of it, its run is invalid
            return endpoint_failures[-1].termination_reason, status, str(endpoint_failures[-1])
        if ended.agent_code in self.exit_reasons:
            return self.exit_reasons[ended.agent_code], status, ""
        if relay.upstream_errors:  # answers to requests the agent shaped (400s): the agent's, not the endpoint's
            return EXECUTION_ERROR, status, relay.upstream_errors[-1]
        return EXECUTION_ERROR, status, f"the agent stopped without finishing: {ended.stderr[-2000:]}"


@dataclass
class Ended:
    """How the agent's process tree ended: the agent's exit code as the bridge reported it (None: never reported),
    the exec's own exit code, the tail of the agent's stderr, why the container was lost (empty: it was not), and
    whether it ended because its full process table was emptied (the agent's process with it)."""

    agent_code: int | None = None
    exec_code: int | None = None
    stderr: str = ""
    lost: str = ""
    recovered: bool = False


def attach(box: Any, argv: list[str], workdir: str, watchdog_seconds: float, relay: ModelRelay,
           exhausted: Callable[[Any], bool] | None = None) -> Ended:
    """Run `argv` in the container with its stdin and stdout as the bridge's channel, answering each request line
    with `relay`, until the process ends. `exhausted(body)`, asked before each request is answered, says the
    container's processes were all ended because the request showed it exhausted: the request is left unanswered
    and the session ends.

    Raises:
        SandboxUnavailableError: the daemon failed while the container was still running.
    """
    from docker.utils.socket import frames_iter

    ended, fired = Ended(), threading.Event()

    def watchdog() -> None:
        fired.set()
        try:
            box.container.kill()
        except Exception:  # already gone
            pass

    api = box.client.api
    timer = threading.Timer(watchdog_seconds, watchdog)
    tail: collections.deque[bytes] = collections.deque(maxlen=64)
    try:
        exec_id = api.exec_create(box.container.id, argv, stdin=True, user="0", environment=AGENT_ENV,
                                  workdir=workdir)["Id"]
        sock = api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)
        timer.start()
        pending = b""
        for stream, data in frames_iter(sock, tty=False):
            if stream != 1:
                tail.append(data[-STDERR_TAIL_BYTES:])
                continue
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                _answer(line, relay, raw, ended, exhausted)
            if len(pending) > MAX_LINE_BYTES:
                pending = b""  # not a frame the bridge writes: the agent's doing, dropped
        raw.close()
        ended.exec_code = None if fired.is_set() else api.exec_inspect(exec_id)["ExitCode"]
    except Exception as exc:
        if not fired.is_set() and _running(box):
            raise SandboxUnavailableError(f"the daemon failed while the agent ran in {box.name}: {exc}") from exc
    finally:
        timer.cancel()
    ended.stderr = b"".join(tail)[-STDERR_TAIL_BYTES:].decode("utf-8", "replace")
    if fired.is_set() or not _running(box):
        cause = "its memory limit (the OOM killer)" if box.stopped_by_oom_killer() else "the agent outliving its " \
            "time limit, or the container's limits"
        ended.lost = f"the workspace container {box.name} stopped ({cause}); the agent's work in it is lost"
    return ended


def _answer(line: bytes, relay: ModelRelay, raw: Any, ended: Ended,
            exhausted: Callable[[Any], bool] | None = None) -> None:
    """Handle one line of the bridge: a request (answered on its stdin, unless `exhausted` ended the container's
    processes) or the agent's exit; anything else is dropped (only the agent could have written it)."""
    try:
        frame = json.loads(line)
    except ValueError:
        return
    if not isinstance(frame, dict):
        return
    if frame.get("kind") == "exit" and isinstance(frame.get("code"), int) and ended.agent_code is None:
        ended.agent_code = frame["code"]
    elif frame.get("kind") == "request":
        body = frame.get("body")
        if ended.recovered:
            return  # the processes were ended: the bridge is gone
        if exhausted is not None and exhausted(body):
            ended.recovered = True
            return
        status, answer = relay.handle(str(frame.get("method")), str(frame.get("path")),
                                      body.encode() if isinstance(body, str) else b"")
        reply = {"id": frame.get("id"), "status": status, "body": json.dumps(answer)}
        try:
            raw.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:  # the bridge is gone; its end is read next
            pass


def _fork_failed(body: Any) -> bool:
    """Whether a request's last message (the agent's report of its last command) says a fork failed."""
    try:
        messages = json.loads(body).get("messages") if isinstance(body, str) else None
    except (ValueError, AttributeError):
        return False
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, dict) else None
    return isinstance(content, str) and FORK_FAILED in content[-OUTPUT_SCAN_CHARS:]


def _running(box: Any) -> bool:
    try:
        box.container.reload()
    except Exception:
        return False
    return bool((box.container.attrs.get("State") or {}).get("Running"))


def _incontainer(name: str) -> bytes:
    """A file of `incontainer/`, shipped as package data."""
    return (resources.files("asyncodebench.agents") / "incontainer" / name).read_bytes()


def shell_agent() -> CliAgent:
    """The example command-line agent: `incontainer/shell_agent.py`, one bash command per model response."""
    return CliAgent(
        name="shell-cli", version="1",
        files={"shell_agent.py": _incontainer("shell_agent.py")},
        argv=("{python}", "-I", "{dir}/shell_agent.py", "--instruction", "{instruction}", "--command-timeout",
              "{command_timeout}"),
        exit_reasons={0: AGENT_FINISH, 5: STUCK_DETECTED},
    )
