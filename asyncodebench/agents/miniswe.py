"""The default agent: mini-swe-agent 2.x (PyPI `mini-swe-agent`), its loop on the host, its commands in the task's
container. Its `DefaultAgent` runs as published; this module gives it three parts: a model (its `LitellmModel`,
pointed at an OpenAI-compatible endpoint, with client errors such as a used-up script ending the run instead of
being retried), an environment whose `execute` is the workspace's (`container.AgentWorkspace`), and a subclass that
writes each message to the trajectory as it is added (and shows the messages of its inbox, if any, as a user message
after each step's observations: how a manager's message reaches a running agent). The budget is its `step_limit`:
one step is one model response (METRICS section 9), format errors included. Importing this module imports litellm
(seconds), so the runner imports it only when an agent is about to run.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Any

# Before mini-swe-agent and litellm are imported: no start-up banner, and litellm's cost map from its own package
# rather than fetched from the network at import.
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
import minisweagent  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.exceptions import Submitted  # noqa: E402
from minisweagent.models.litellm_model import LitellmModel  # noqa: E402
from minisweagent.models.utils.actions_toolcall import BASH_TOOL  # noqa: E402

from asyncodebench.agents.adapter import (  # noqa: E402
    AGENT_FINISH,
    CONTEXT_WINDOW_ERROR,
    EXECUTION_ERROR,
    INBOX_HEADER,
    ITERATION_LIMIT,
    PROVIDER_ERROR,
    STUCK_DETECTED,
    WALL_CLOCK_TIMEOUT,
    AgentRun,
    AgentSpec,
    Inbox,
    ModelEndpoint,
    Usage,
    Workspace,
    now,
)
from asyncodebench.agents.container import WorkspaceLostError  # noqa: E402
from asyncodebench.agents.cost import CostLimitReached  # noqa: E402
from asyncodebench.agents.model_client import EndpointError, ModelClient  # noqa: E402
from asyncodebench.agents.trajectory import OUTPUT_CHARS, TrajectoryWriter  # noqa: E402
from asyncodebench.harness.sandbox import SandboxUnavailableError  # noqa: E402

litellm.suppress_debug_info = True  # its "Provider List" notice on every response it cannot price

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SYSTEM_TEMPLATE = (
    "You are a software engineer working on a code repository inside a sandboxed container without network "
    "access. You act only through the `bash` tool: every reply must call it with one shell command (commands may be "
    "joined with && or ||). Each command runs in a fresh shell in the repository's root, so `cd` and exported "
    "variables do not carry over. Edit files with shell tools (sed, cat with a here-document, python). Explain "
    "your reasoning briefly before each command.\n\n"
    f"When your work is complete, call the tool with `echo {SUBMIT}` alone; after that you cannot act again."
)
INSTANCE_TEMPLATE = "{{task}}"
# The observation of a command: its exit code and output, long output cut to its head and tail.
OBSERVATION_TEMPLATE = (
    "{% if output.exception_info %}<error>{{ output.exception_info }}</error>\n{% endif %}"
    "<exit_code>{{ output.returncode }}</exit_code>\n"
    "{% if output.output | length <= 12000 %}<output>\n{{ output.output }}</output>"
    "{% else %}<output_head>\n{{ output.output[:6000] }}</output_head>\n"
    "<omitted>{{ output.output | length - 12000 }} characters; narrow the command to see them</omitted>\n"
    "<output_tail>\n{{ output.output[-6000:] }}</output_tail>{% endif %}"
)
FORMAT_ERROR_TEMPLATE = (
    "Your reply could not be used: {{ error }}\nCall the `bash` tool with exactly one command, or call it with "
    f"`echo {SUBMIT}` alone when you are done."
)
REPLY_CHARS, MAX_CALLS_KEPT = 8_000, 8  # of an unusable reply kept in the trajectory
EXIT_REASONS = {"Submitted": AGENT_FINISH, "LimitsExceeded": ITERATION_LIMIT, "TimeExceeded": WALL_CLOCK_TIMEOUT,
                "RepeatedFormatError": STUCK_DETECTED}


class EndpointModel(LitellmModel):
    """mini-swe-agent's litellm model whose requests go through the runner's `ModelClient` (its retries, timeouts
    and records); mini-swe-agent's own retry loop never retries (every exception aborts), so the client's count."""

    abort_exceptions = [Exception, KeyboardInterrupt]  # type: ignore[list-item]  # tenacity takes BaseExceptions

    def __init__(self, *, client: ModelClient | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client

    def _query(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        if self.client is None:
            return super()._query(messages, **kwargs)
        return litellm.ModelResponse(**self.client.complete({"messages": messages, "tools": [BASH_TOOL], **kwargs}))


def endpoint_model(endpoint: ModelEndpoint, client: ModelClient | None = None) -> EndpointModel:
    """The model for `endpoint`: an OpenAI-compatible server at `base_url` (the name sent as it is), or a litellm
    model id, asked through `client` (default: a client of its own without records). Costs are not priced (0
    unless litellm knows the model); tokens are counted from the responses."""
    name, kwargs = endpoint.litellm_args()
    return EndpointModel(model_name=name, model_kwargs=kwargs, cost_tracking="ignore_errors",
                         observation_template=OBSERVATION_TEMPLATE, format_error_template=FORMAT_ERROR_TEMPLATE,
                         client=client or ModelClient(endpoint, endpoint.name))


class ContainerEnvironment:
    """mini-swe-agent's Environment protocol over an agent workspace: commands run in the task's container."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.config = {"workdir": workspace.workdir}

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run the action's command; raise `Submitted` when its output starts with the submit line."""
        done = self.workspace.execute(str(action.get("command", "")), timeout)
        output = {"output": done.output, "returncode": done.exit_code if done.exit_code is not None else -1,
                  "exception_info": "", "extra": {"seconds": done.seconds, "timed_out": done.timed_out}}
        lines = done.output.lstrip().splitlines()
        if lines and lines[0].strip() == SUBMIT and done.exit_code == 0:
            raise Submitted({"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}})
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """Variables the prompt templates may use."""
        return {"workdir": self.workspace.workdir, **kwargs}

    def serialize(self) -> dict[str, Any]:
        """The environment as mini-swe-agent's own trajectory format describes it."""
        return {"info": {"config": {"environment": self.config, "environment_type": type(self).__name__}}}


class RecordingAgent(DefaultAgent):
    """mini-swe-agent's DefaultAgent, writing each message to the trajectory as it is added."""

    def __init__(self, writer: TrajectoryWriter, *args: Any, inbox: Inbox | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writer = writer
        self.inbox = inbox
        self.commands: dict[str, str] = {}  # tool call id -> command, to name each observation's command
        self.usage = Usage()

    def add_messages(self, *messages: dict[str, Any]) -> list[dict[str, Any]]:
        """Record each message in the trajectory, then add it as mini-swe-agent does."""
        for message in messages:
            self._record(message)
        return super().add_messages(*messages)

    def execute_actions(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """Run the response's commands as mini-swe-agent does, then add the inbox's messages (the agent reads them
        with the observations, before its next response)."""
        added = super().execute_actions(message)
        for text in self.inbox.take() if self.inbox is not None else []:
            added += self.add_messages({"role": "user", "content": f"{INBOX_HEADER}\n{text}", "extra": {"inbox": True}})
        return added

    def _record(self, message: dict[str, Any]) -> None:
        extra = message.get("extra") or {}
        role, content = message.get("role"), message.get("content")
        tokens = self._count(extra.get("response"))
        if role == "assistant":
            actions = extra.get("actions") or []
            self.commands.update({a.get("tool_call_id", ""): a.get("command", "") for a in actions})
            self.writer.write("response", content=content, commands=[a.get("command") for a in actions], **tokens)
        elif role == "tool":
            output = str(extra.get("raw_output", ""))[-OUTPUT_CHARS:]
            self.writer.write("observation", command=self.commands.get(message.get("tool_call_id", ""), ""),
                              output=output, exit_code=extra.get("returncode"), seconds=extra.get("seconds"),
                              timed_out=extra.get("timed_out", False))
        elif role == "exit":
            self.writer.write("exit", exit_status=extra.get("exit_status"), content=content)
        elif extra.get("inbox"):
            self.writer.write("inbox", content=content)
        elif extra.get("interrupt_type") == "FormatError":
            self.writer.write("format_error", content=content, reply=unusable_reply(extra.get("response")), **tokens)
        else:
            self.writer.write("message", role=role, content=content)

    def _count(self, response: Any) -> dict[str, int]:
        """The token counts of a model response (and count it); empty for a message without one."""
        if not isinstance(response, dict):
            return {}
        usage = response.get("usage") or {}
        tokens = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                  "completion_tokens": int(usage.get("completion_tokens") or 0)}
        self.usage = self.usage + Usage(tokens["prompt_tokens"], tokens["completion_tokens"], 1)
        return tokens


def unusable_reply(response: Any) -> dict[str, Any]:
    """What the model sent in a reply the agent could not use (prose without a tool call, an unknown tool, broken
    arguments), bounded: its text and each tool call's name and arguments, as the endpoint gave them."""
    if not isinstance(response, dict):
        return {"raw": str(response)[:REPLY_CHARS]}
    choices = response.get("choices") or [{}]
    message = (choices[0] if isinstance(choices[0], dict) else {}).get("message") or {}
    calls = [c.get("function") or {} for c in message.get("tool_calls") or [] if isinstance(c, dict)][:MAX_CALLS_KEPT]
    return {"content": str(message.get("content") or "")[:REPLY_CHARS],
            "tool_calls": [{"name": str(f.get("name"))[:200], "arguments": str(f.get("arguments"))[:REPLY_CHARS]}
                           for f in calls if isinstance(f, dict)],
            "finish_reason": (choices[0] if isinstance(choices[0], dict) else {}).get("finish_reason")}


class MiniSweAgent:
    """The `AgentAdapter` of mini-swe-agent."""

    name = "mini-swe-agent"
    version = minisweagent.__version__

    def __init__(self, max_format_errors: int = 3) -> None:
        self.max_format_errors = max_format_errors

    def run(self, agent: AgentSpec, workspace: Workspace, budget: int) -> AgentRun:
        """Run the agent loop on `agent.instruction` until it submits, hits `budget` responses or fails.

        Raises:
            SandboxUnavailableError: the container engine failed (infrastructure; nothing is recorded as the
                agent's outcome).
        """
        writer = TrajectoryWriter(agent.trajectory)
        started, clock = now(), time.monotonic()
        seconds = agent.model.limits.agent_seconds
        client = ModelClient(agent.model, f"{agent.trajectory.parent.parent.name} {agent.agent_id}", writer.write,
                             clock + seconds if seconds else None, cost=agent.cost)
        loop = RecordingAgent(writer, endpoint_model(agent.model, client), ContainerEnvironment(workspace),
                              system_template=SYSTEM_TEMPLATE, instance_template=INSTANCE_TEMPLATE,
                              step_limit=budget, cost_limit=0, max_consecutive_format_errors=self.max_format_errors,
                              wall_time_limit_seconds=int(seconds or 0), inbox=agent.inbox)
        detail, reason = "", None
        try:
            exit_status = str(loop.run(agent.instruction).get("exit_status", ""))
        except SandboxUnavailableError:
            writer.close()
            raise
        except EndpointError as exc:
            exit_status, reason, detail = type(exc).__name__, exc.termination_reason, str(exc)[-2000:]
        except CostLimitReached as exc:  # the model's spending: a valid ending, as the response budget's is
            exit_status, reason, detail = type(exc).__name__, exc.termination_reason, str(exc)
        except litellm.exceptions.ContextWindowExceededError as exc:
            exit_status, reason, detail = type(exc).__name__, CONTEXT_WINDOW_ERROR, str(exc)
        except WorkspaceLostError as exc:
            exit_status, reason, detail = type(exc).__name__, EXECUTION_ERROR, str(exc)
        except Exception as exc:  # the model's client: litellm and openai raise many unrelated types
            exit_status, reason, detail = type(exc).__name__, PROVIDER_ERROR, str(exc)[-2000:]
        reason = reason or EXIT_REASONS.get(exit_status, EXECUTION_ERROR)
        usage = Usage(loop.usage.prompt_tokens, loop.usage.completion_tokens, loop.usage.responses,
                      round(time.monotonic() - clock, 3))
        run = AgentRun(agent.agent_id, reason, exit_status, reason == ITERATION_LIMIT, usage, started, now(),
                       agent.trajectory, detail, client.retries, client.timeouts, client.cost_usd)
        writer.write("summary", agent=f"{self.name} {self.version}", termination_reason=reason,
                     exit_status=exit_status, iteration_cap_hit=run.iteration_cap_hit, detail=detail,
                     usage={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                            "total_tokens": usage.total_tokens, "responses": usage.responses,
                            "seconds": usage.seconds, "cost_usd": run.cost_usd},
                     model_calls={"retries": client.retries, "timeouts": client.timeouts,
                                  "limits": asdict(agent.model.limits)})
        writer.close()
        return run
