"""The host side of an in-container agent's model calls: forwards its chat-completion requests to the agent's model
endpoint, enforces its budget, counts its tokens and writes each exchange to its trajectory.

The agent is hostile code in a container without network; the relay is the only way its requests leave it, so
every rule is enforced here, never trusted to the agent: the model is the agent's endpoint whatever the request
names; only known chat-completion parameters pass (`n`, provider extras and streaming do not); once `budget` model
responses were given, every further request is answered with a `budget_exhausted` error, and after
`MAX_UPSTREAM_ERRORS` failed calls with `too_many_errors`. The key is added here, on the host: it never reaches the
agent. Requests are handled one at a time, so concurrent requests cannot overrun the budget.

Trajectory lines (`trajectory.py`'s shapes): the messages of each request that are new since the previous one
(`message` for system and user text, `observation` for a `tool` message, with the command of the call it answers
and the output as the agent gave it to the model; exit code and seconds are not known to the relay and are null),
each model response (`response`, with `model_seconds`: the call's time as the relay saw it), each refused or
failed request (`error`, with `status`, `code` and `message`; the first `MAX_ERROR_LINES` of them), each
manager's message it showed the model (`inbox`), and the model client's `retry` and `timeout` lines.

Manager messages (the manager protocols' `inbox`) reach the model through the relay, since the agent in the
container has no other channel: a message posted while the agent runs is added as a user message at the end of its
next forwarded request, and kept at that place in every later request (the agent resends its history without it),
so the model sees one consistent conversation.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from asyncodebench.agents.adapter import INBOX_HEADER, Inbox, ModelEndpoint, Usage
from asyncodebench.agents.cost import CostLimitReached
from asyncodebench.agents.model_client import EndpointError, ModelClient
from asyncodebench.agents.trajectory import OUTPUT_CHARS, TrajectoryWriter

MAX_REQUEST_BYTES = 16 << 20
MAX_UPSTREAM_ERRORS = 10
MAX_ERROR_LINES = 50
# What an agent may ask for besides `messages`; everything else (`n`, `stream`, `user`, provider extras) is dropped.
PARAMETERS = frozenset({
    "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "max_tokens", "max_completion_tokens",
    "stop", "seed", "response_format", "frequency_penalty", "presence_penalty", "reasoning_effort"})
BUDGET_EXHAUSTED, TOO_MANY_ERRORS, COST_EXHAUSTED = "budget_exhausted", "too_many_errors", "cost_limit"


class ModelRelay:
    """Serves one agent run: `handle(method, path, body)` answers one request as (HTTP status, JSON object)."""

    def __init__(self, endpoint: ModelEndpoint, budget: int, writer: TrajectoryWriter, inbox: Inbox | None = None,
                 deadline: float | None = None, label: str = "", cost: Any = None) -> None:
        self.endpoint, self.budget, self.writer, self.inbox = endpoint, budget, writer, inbox
        self.client = ModelClient(endpoint, label or endpoint.name, writer.write, deadline, cost=cost)
        self.cost_refusals: list[str] = []  # requests refused because a cost cap was reached (why)
        self.failures: list[EndpointError] = []  # model calls that failed for good (after the client's retries)
        self.usage = Usage()
        self.budget_refusals = 0  # requests refused because the budget was spent
        self.upstream_errors: list[str] = []
        self.errors_written = 0
        self.model_seconds: list[float] = []  # each given response's call time, as the relay saw it
        self.lock = threading.Lock()
        self._seen = 0  # messages of the conversation recorded so far (the agent resends its whole history)
        self._calls: dict[str, str] = {}  # tool call id -> command, to name each observation's command
        self._last: tuple[Any, ...] | None = None  # the last response given, to skip the agent's echo of it
        # the manager messages shown so far: (their place in the agent's message list, the message)
        self._shown: list[tuple[int, dict[str, str]]] = []

    def restart(self, note: str) -> None:
        """The agent is started again with a new conversation: record why, and read its history from the start."""
        with self.lock:
            self._seen, self._last, self._shown = 0, None, []
            self.writer.write("restart", content=note)

    @property
    def budget_spent(self) -> bool:
        """Whether the agent asked for more than its budget (the relay refused at least once for it)."""
        return self.budget_refusals > 0

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """Answer one request of the agent (never raises on anything the agent sends)."""
        with self.lock:
            return self._handle(method, path, body)

    def _handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        if method != "POST" or not path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            return self._error(404, "not_found", f"the relay serves only POST .../v1/chat/completions, not {method} "
                                                 f"{path[:200]}")
        if len(body) > MAX_REQUEST_BYTES:
            return self._error(413, "request_too_large", f"requests are limited to {MAX_REQUEST_BYTES} bytes")
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return self._error(400, "bad_request", "the body must be a JSON object with a list of `messages`")
        if request.get("stream"):
            return self._error(400, "bad_request", "the relay does not stream; ask without stream=true")
        if self.usage.responses >= self.budget:
            self.budget_refusals += 1
            return self._error(429, BUDGET_EXHAUSTED, f"the budget of {self.budget} model responses of this agent "
                                                      "is spent: stop now, your work is collected as it is")
        if len(self.upstream_errors) >= MAX_UPSTREAM_ERRORS:
            return self._error(503, TOO_MANY_ERRORS, f"{MAX_UPSTREAM_ERRORS} model calls failed; no more are made")
        self._record_messages(request["messages"])
        forwarded = {k: v for k, v in request.items() if k in PARAMETERS}
        forwarded["messages"] = self._with_inbox(request["messages"])
        forwarded.update(self.endpoint.sampling())  # the run's sampling parameters, whatever the agent asked
        started = time.monotonic()
        try:
            status, answer = self._forward(forwarded)
        except CostLimitReached as exc:  # the agent's spending: refused, as a spent budget is
            self.cost_refusals.append(str(exc))
            return self._error(429, COST_EXHAUSTED, f"{exc}: stop now, your work is collected as it is")
        seconds = round(time.monotonic() - started, 4)
        if status != 200:
            message = str((answer.get("error") or {}).get("message", answer))[:2000] if isinstance(
                answer.get("error"), dict) else str(answer)[:2000]
            self.upstream_errors.append(f"{status}: {message}")
            return self._error(status if 400 <= status < 600 else 502, "upstream_error",
                               f"the model endpoint answered {status}: {message}")
        self._record_response(answer, seconds)
        return 200, answer

    def _with_inbox(self, messages: list[Any]) -> list[Any]:
        """The agent's messages with every manager message shown so far at its place; messages posted since the last
        request are taken now and go at the end (where the agent is about to get its next response)."""
        for text in self.inbox.take() if self.inbox is not None else []:
            self._shown.append((len(messages), {"role": "user", "content": f"{INBOX_HEADER}\n{text}"}))
            self.writer.write("inbox", content=text[-OUTPUT_CHARS:])
        merged: list[Any] = []
        shown = iter(self._shown)
        pending = next(shown, None)
        for index, message in enumerate(messages):
            while pending is not None and pending[0] <= index:
                merged.append(pending[1])
                pending = next(shown, None)
            merged.append(message)
        while pending is not None:  # at the end, or past it when the agent shortened its history
            merged.append(pending[1])
            pending = next(shown, None)
        return merged

    def _forward(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The endpoint's answer to `request`, through the run's model client (its retries and timeouts)."""
        try:
            return 200, self.client.complete(request)
        except EndpointError as exc:
            self.failures.append(exc)
            status = exc.failure.status
            return (status if status is not None and 400 <= status < 600 else 502), {
                "error": {"message": f"no usable answer from the model endpoint: {exc}"}}

    def _record_messages(self, messages: list[Any]) -> None:
        new = messages[self._seen:] if len(messages) >= self._seen else messages
        self._seen = len(messages) + 1  # the response about to be given is the next message of the history
        for message in new:
            if not isinstance(message, dict):
                self.writer.write("message", role=None, content=str(message)[-OUTPUT_CHARS:])
                continue
            role, content = message.get("role"), _text(message.get("content"))
            if role == "assistant" and self._last == (content, _commands(message)):
                continue  # the agent's copy of the response the relay gave (recorded as a `response` line)
            if role == "tool":
                self.writer.write("observation", command=self._calls.get(str(message.get("tool_call_id")), ""),
                                  output=content[-OUTPUT_CHARS:], exit_code=None, seconds=None, timed_out=None)
            else:
                self.writer.write("message", role=role, content=content[-OUTPUT_CHARS:])

    def _record_response(self, answer: dict[str, Any], seconds: float) -> None:
        usage = _dict(answer.get("usage"))
        prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        self.usage = self.usage + Usage(prompt, completion, 1)
        self.model_seconds.append(seconds)
        choices = answer.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(
            choices[0], dict) else None
        message = message if isinstance(message, dict) else {}
        content, commands = _text(message.get("content")), _commands(message)
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                self._calls[str(call.get("id"))] = _command(call) or ""
        self._last = (content, commands)
        # tool calls without a usable bash command (another tool, arguments that are not JSON): kept as sent, bounded
        calls = message.get("tool_calls")
        calls = calls if isinstance(calls, list) else []
        unusable = [{"name": str(_dict(c.get("function")).get("name"))[:200],
                     "arguments": str(_dict(c.get("function")).get("arguments"))[:OUTPUT_CHARS // 10]}
                    for c in calls[:8] if isinstance(c, dict) and _command(c) is None]
        self.writer.write("response", content=content, commands=list(commands), prompt_tokens=prompt,
                          completion_tokens=completion, model_seconds=seconds,
                          **({"unusable_tool_calls": unusable} if unusable else {}))

    def _error(self, status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
        if self.errors_written < MAX_ERROR_LINES:
            self.errors_written += 1
            self.writer.write("error", status=status, code=code, message=message)
        return status, {"error": {"message": f"asyncodebench relay: {message}", "type": "relay_error", "code": code}}


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _command(call: dict[str, Any]) -> str | None:
    function = _dict(call.get("function"))
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        return None
    command = arguments.get("command") if isinstance(arguments, dict) else None
    return command if isinstance(command, str) else None


def _commands(message: dict[str, Any]) -> tuple[str, ...]:
    """The commands of a message's tool calls (those with a `command` argument, as a `bash` tool has)."""
    calls = message.get("tool_calls")
    found = (_command(c) for c in (calls if isinstance(calls, list) else []) if isinstance(c, dict))
    return tuple(c for c in found if c is not None)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
