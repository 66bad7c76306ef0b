"""The agent adapter interface: what the protocols give an agent and what they get back.

A protocol starts a workspace (a task container prepared at the agent's start state, `container.AgentWorkspace`),
hands it with the agent's spec and budget to an adapter, and, when the adapter returns, reads the agent's patch
from the workspace itself: an adapter never reports its own diff, so every agent is judged the same way. The
default adapter is mini-swe-agent (`miniswe.MiniSweAgent`); another agent plugs in by implementing `AgentAdapter`
(a loop on the host that calls `workspace.execute`, or a command-line agent started inside the container with it).

Messages (the manager protocols) reach a running agent through its spec's `inbox`: an adapter that supports them
calls `inbox.take()` between steps and shows what it returns in the agent's next observation; one that does not
leaves the inbox alone, and undelivered messages are recorded as such when the agent finishes.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

# Why an agent stopped (METRICS section 9): the valid reasons, then those that make a run invalid or need review.
AGENT_FINISH, ITERATION_LIMIT, STUCK_DETECTED, ADAPTER_COMPLETED = (
    "agent_finish", "iteration_limit", "stuck_detected", "adapter_completed")
CONTEXT_WINDOW_ERROR, PROVIDER_ERROR, WALL_CLOCK_TIMEOUT, EXECUTION_ERROR = (
    "context_window_error", "provider_or_transport_error", "wall_clock_timeout", "execution_error")
COST_LIMIT = "cost_limit"  # the agent's or the scenario's cost cap was reached: valid, the model's spending


# What invalidates a scenario (METRICS section 9): an agent or the manager ended because its model could not be used.
INVALID_TERMINATIONS = frozenset({CONTEXT_WINDOW_ERROR, PROVIDER_ERROR})

DEFAULT_REQUEST_TIMEOUT_SECONDS = 600.0
DEFAULT_RETRY_SECONDS = 600.0
DEFAULT_AGENT_SECONDS = 21_600.0


@dataclass(frozen=True)
class CallLimits:
    """How long model calls may take (`model_client.ModelClient` applies them): one request (`request_timeout`), the
    retries of one failing call (`retry_seconds`, counted from the start of its first failed attempt), and one agent
    run in all (`agent_seconds`, None: no limit; the manager's calls have none)."""

    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_SECONDS
    retry_seconds: float = DEFAULT_RETRY_SECONDS
    agent_seconds: float | None = DEFAULT_AGENT_SECONDS


@dataclass(frozen=True)
class CostLimits:
    """What model responses cost and the caps on it (`cost.py` applies them): the prices, in US dollars per million
    prompt and completion tokens (None: not priced, no cap possible), the cap of one agent run (the manager's
    included) and of one scenario's calls in all (None: none)."""

    prompt_per_million: float | None = None
    completion_per_million: float | None = None
    max_agent_usd: float | None = None
    max_scenario_usd: float | None = None

    @property
    def priced(self) -> bool:
        """Whether responses are priced (a price table was given)."""
        return self.prompt_per_million is not None and self.completion_per_million is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The cost of a response's tokens (0 when not priced)."""
        if not self.priced:
            return 0.0
        return (prompt_tokens * (self.prompt_per_million or 0.0)
                + completion_tokens * (self.completion_per_million or 0.0)) / 1e6


@dataclass(frozen=True)
class ModelEndpoint:
    """Which model an agent asks, and where: `name` as the endpoint knows it; `base_url` of an OpenAI-compatible
    endpoint (None: `name` is a litellm id such as `anthropic/...`, reached with its provider's usual key);
    `api_key_env`: the environment variable holding the key (never the key itself, which stays out of records);
    the sampling parameters sent with every request (None: the endpoint's own default); the prices and cost caps."""

    name: str
    base_url: str | None = None
    api_key_env: str | None = None
    limits: CallLimits = CallLimits()
    cost: CostLimits = CostLimits()
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters given, as a chat-completions request takes them."""
        given = {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}
        return {k: v for k, v in given.items() if v is not None}

    def to_record(self) -> dict[str, Any]:
        """The endpoint as settings and predictions record it."""
        return asdict(self)

    def litellm_args(self) -> tuple[str, dict[str, Any]]:
        """The model name and keyword arguments litellm takes for this endpoint: an OpenAI-compatible server at
        `base_url` (the name sent as it is, the key from `api_key_env` or OPENAI_API_KEY), or a litellm model id."""
        kwargs: dict[str, Any] = {"drop_params": True, **self.sampling()}
        if self.base_url:
            kwargs["api_base"] = self.base_url
            kwargs["api_key"] = os.environ.get(self.api_key_env or "OPENAI_API_KEY") or "none"
            return f"openai/{self.name}", kwargs
        if self.api_key_env:
            kwargs["api_key"] = os.environ.get(self.api_key_env, "")
        return self.name, kwargs


@dataclass(frozen=True)
class AgentSpec:
    """One agent of a scenario, as an adapter runs it."""

    agent_id: str
    role: str
    writable_paths: tuple[str, ...]
    instruction: str  # the whole task as this agent is told it (prompts.instruction)
    model: ModelEndpoint
    trajectory: Path  # where the adapter writes the agent's trajectory (JSONL, one line per message)
    inbox: Inbox | None = None  # messages for the agent while it runs (manager protocols); None: none will come
    cost: Any = None  # its `cost.AgentCost` (checked and counted by its model client); None: not priced


INBOX_HEADER = "<message from your team's manager>"  # how every adapter shows the agent a manager's message


class Inbox:
    """Messages for one running agent: posted from another thread, taken by its adapter between steps.

    `on_delivered(text)` is called for each message as the adapter takes it (the protocol records the delivery).
    Once closed (the agent finished), a post is refused: the message is not delivered.
    """

    def __init__(self, on_delivered: Callable[[str], None] | None = None) -> None:
        self._pending: list[str] = []
        self._closed = False
        self._lock = threading.Lock()
        self._on_delivered = on_delivered

    def post(self, text: str) -> bool:
        """Queue `text` for the agent's next observation; False when the agent has already finished."""
        with self._lock:
            if self._closed:
                return False
            self._pending.append(text)
            return True

    def take(self) -> list[str]:
        """The messages posted since the last take, oldest first (the adapter shows them to the agent)."""
        with self._lock:
            taken, self._pending = self._pending, []
        for text in taken:
            if self._on_delivered is not None:
                self._on_delivered(text)
        return taken

    @property
    def closed(self) -> bool:
        """Whether the agent has finished (a post is refused from now on)."""
        with self._lock:
            return self._closed

    def close(self) -> list[str]:
        """Refuse further posts; return the messages never taken (undelivered)."""
        with self._lock:
            self._closed = True
            left, self._pending = self._pending, []
        return left


@dataclass(frozen=True)
class Usage:
    """What an agent's run cost: tokens as the endpoint reported them, model responses, wall time."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    responses: int = 0
    seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.responses + other.responses, round(self.seconds + other.seconds, 3))

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens (METRICS section 10)."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class AgentRun:
    """How one agent's run ended. `termination_reason` is one of the constants above; `exit_status` is the
    adapter's own word for it; `detail` says more when the run failed; `retries` and `timeouts` count the model
    calls' waits before another attempt and attempts that got no answer in time (`model_client.ModelClient`), and
    `cost_usd` what its responses cost."""

    agent_id: str
    termination_reason: str
    exit_status: str
    iteration_cap_hit: bool
    usage: Usage
    started_at: str
    finished_at: str
    trajectory: Path
    detail: str = ""
    retries: int = 0
    timeouts: int = 0
    cost_usd: float | None = None  # what its responses cost at the run's prices (None: no price table)

    def to_record(self, relative_to: Path) -> dict[str, Any]:
        """The run as the scenario record keeps it, the trajectory as a path relative to the run folder."""
        record = asdict(self)
        record["usage"] = {**asdict(self.usage), "total_tokens": self.usage.total_tokens}
        record["trajectory"] = str(self.trajectory.relative_to(relative_to))
        return record


@dataclass(frozen=True)
class CommandResult:
    """What one command did in the workspace: its output (stdout and stderr, the tail), exit code (None when it
    was killed from outside), seconds, and whether its time limit ended it."""

    output: str
    exit_code: int | None
    seconds: float
    timed_out: bool


class Workspace(Protocol):
    """Where an agent's commands run: the task's container at the agent's start state."""

    workdir: str

    def execute(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run a shell command as the unprivileged sandbox user in the work tree."""
        ...


class AgentAdapter(Protocol):
    """An agent the protocols can run. `name` and `version` go into every prediction the agent makes."""

    name: str
    version: str

    def run(self, agent: AgentSpec, workspace: Workspace, budget: int) -> AgentRun:
        """Work on `agent.instruction` in `workspace` until done or `budget` model responses were used; write the
        trajectory to `agent.trajectory`. Failures of the model or the workspace end the run with their
        termination reason; they are not raised."""
        ...


def now() -> str:
    """The current time as records keep it (UTC, ISO 8601, milliseconds)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")
