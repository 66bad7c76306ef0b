"""One client for every model call of the runner: the specialists' loops (mini-swe-agent), the manager, the relay of
in-container agents and the run's preflight all ask the model through `ModelClient.complete`.

A call is one chat-completion request (an OpenAI-compatible JSON object) answered by the endpoint's JSON object.
Each attempt is bounded by the request timeout (and by what is left of the agent's wall clock); an attempt that
fails for a reason another attempt may not share (a refused or reset connection, a timeout, 408, 409, 425, 429, a
5xx, an answer that is not JSON) is retried after an exponential wait (1 s, 2 s, 4 s ... at most 60 s), one stderr
line per wait, until `CallLimits.retry_seconds` have passed since the first failed attempt started. A failure no
retry can change (401 and 403: the key; 404: the model name or URL; 400: a bad request, tools the server does not
support, a prompt longer than the context window) ends the call at once. Either way the call raises
`EndpointError`, whose `termination_reason` is `context_window_error` or `provider_or_transport_error` (METRICS
section 9: invalid, the scenario is not a result), or `wall_clock_timeout` when the agent's clock ran out.

With a cost account (`cost.AgentCost`), each call first checks its caps (`cost.CostLimitReached`: the agent's
spending, never the endpoint's failure) and counts the answer's reported usage at the run's prices.

Every retry and every timeout is passed to `record` (the agent's trajectory writes it), so a trajectory shows what
the endpoint did as well as what the model said.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable

from asyncodebench.agents.adapter import CONTEXT_WINDOW_ERROR, PROVIDER_ERROR, WALL_CLOCK_TIMEOUT, ModelEndpoint
from asyncodebench.agents.cost import AgentCost

MAX_ANSWER_BYTES = 64 << 20
MESSAGE_CHARS = 2000  # of an endpoint's error message kept in records
FIRST_WAIT_SECONDS, MAX_WAIT_SECONDS = 1.0, 60.0

# Why an attempt failed: the kinds no retry can change, then those another attempt may not share.
AUTH, NOT_FOUND, TOOLS_UNSUPPORTED, CONTEXT_WINDOW, BAD_REQUEST = (
    "auth", "not_found", "tools_unsupported", "context_window", "bad_request")
REFUSED, UNREACHABLE, TIMEOUT, SERVER_ERROR, BAD_ANSWER = (
    "connection_refused", "unreachable", "timeout", "server_error", "bad_answer")
RETRIED_KINDS = frozenset({REFUSED, UNREACHABLE, TIMEOUT, SERVER_ERROR, BAD_ANSWER})
DEADLINE = "agent_clock"  # the agent's wall clock ran out before or during the call
RETRIED_STATUSES = frozenset({408, 409, 425, 429})
CONTEXT_PHRASES = ("context length", "context window", "maximum context", "context_length", "too many tokens",
                   "prompt is too long", "reduce the length", "input is too long")
TOOL_PHRASES = ("tool choice", "tool_choice", "tool-call", "tool call", "tools are not supported",
                "does not support tools", "tool use", "function calling")


@dataclass(frozen=True)
class Failure:
    """One failed attempt: its kind (above), the HTTP status when there was one, and the endpoint's message."""

    kind: str
    status: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.kind} ({self.status}): {self.message}" if self.status else f"{self.kind}: {self.message}"

    def to_record(self) -> dict[str, Any]:
        """The failure as trajectories and records keep it."""
        return {"failure": self.kind, "status": self.status, "message": self.message[:MESSAGE_CHARS]}


class TransportFailure(Exception):
    """What a transport raises for a failed attempt."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


class EndpointError(Exception):
    """A model call that failed for good: the last attempt's failure, how many attempts were made and over how many
    seconds."""

    def __init__(self, failure: Failure, attempts: int, seconds: float) -> None:
        super().__init__(f"{failure} (after {attempts} attempt(s) over {seconds:.0f} s)")
        self.failure, self.attempts, self.seconds = failure, attempts, seconds

    @property
    def termination_reason(self) -> str:
        """How the agent whose call this was ended (METRICS section 9)."""
        if self.failure.kind == CONTEXT_WINDOW:
            return CONTEXT_WINDOW_ERROR
        if self.failure.kind == DEADLINE:
            return WALL_CLOCK_TIMEOUT
        return PROVIDER_ERROR


def classify(status: int, message: str) -> str:
    """The failure kind of an HTTP error answer."""
    text = message.lower()
    if status in (401, 403):
        return AUTH
    if status == 404:
        return NOT_FOUND
    if status in RETRIED_STATUSES or status >= 500:
        return SERVER_ERROR
    if any(phrase in text for phrase in CONTEXT_PHRASES):
        return CONTEXT_WINDOW
    if any(phrase in text for phrase in TOOL_PHRASES):
        return TOOLS_UNSUPPORTED
    return BAD_REQUEST


Transport = Callable[[dict[str, Any], float], dict[str, Any]]  # (request, timeout) -> answer; TransportFailure


def http_transport(endpoint: ModelEndpoint) -> Transport:
    """POST to the OpenAI-compatible server at `endpoint.base_url`, the model named as the endpoint knows it and
    the key (from `api_key_env`, OPENAI_API_KEY by default) as a bearer token."""
    assert endpoint.base_url is not None
    url = f"{endpoint.base_url.rstrip('/')}/chat/completions"

    def send(request: dict[str, Any], timeout: float) -> dict[str, Any]:
        key = os.environ.get(endpoint.api_key_env or "OPENAI_API_KEY") or "none"
        call = urllib.request.Request(url, data=json.dumps({**request, "model": endpoint.name}).encode(),
                                      method="POST", headers={"Content-Type": "application/json",
                                                              "Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(call, timeout=timeout) as response:  # noqa: S310 - the user's endpoint
                raw = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            message = _error_message(exc.read(MAX_ANSWER_BYTES + 1))
            raise TransportFailure(Failure(classify(exc.code, message), exc.code, message)) from None
        except (TimeoutError, socket.timeout) as exc:
            raise TransportFailure(Failure(TIMEOUT, None, f"no answer within {timeout:.0f} s ({exc})")) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise TransportFailure(Failure(TIMEOUT, None, f"no answer within {timeout:.0f} s")) from None
            kind = REFUSED if isinstance(reason, ConnectionRefusedError) else UNREACHABLE
            raise TransportFailure(Failure(kind, None, f"{url}: {reason}")) from None
        except OSError as exc:  # reset, broken pipe, a read that timed out
            kind = TIMEOUT if "timed out" in str(exc) else UNREACHABLE
            raise TransportFailure(Failure(kind, None, f"{url}: {exc}")) from None
        return _answer(raw)

    return send


def litellm_transport(endpoint: ModelEndpoint) -> Transport:
    """A litellm model id (`anthropic/...`) with its provider's key; litellm's own retries are off (ours count)."""

    def send(request: dict[str, Any], timeout: float) -> dict[str, Any]:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm  # lazy: seconds to import

        name, kwargs = endpoint.litellm_args()
        try:
            answer = litellm.completion(**{**request, **kwargs, "model": name, "num_retries": 0, "max_retries": 0,
                                           "timeout": timeout})
        except litellm.exceptions.ContextWindowExceededError as exc:
            raise TransportFailure(Failure(CONTEXT_WINDOW, 400, str(exc)[-MESSAGE_CHARS:])) from None
        except litellm.exceptions.Timeout as exc:
            raise TransportFailure(Failure(TIMEOUT, None, str(exc)[-MESSAGE_CHARS:])) from None
        except litellm.exceptions.APIConnectionError as exc:
            raise TransportFailure(Failure(UNREACHABLE, None, str(exc)[-MESSAGE_CHARS:])) from None
        except Exception as exc:  # litellm raises many types; the status, when there is one, decides
            status = getattr(exc, "status_code", None)
            message = f"{type(exc).__name__}: {str(exc)[-MESSAGE_CHARS:]}"
            if isinstance(status, int):
                raise TransportFailure(Failure(classify(status, message), status, message)) from None
            raise TransportFailure(Failure(BAD_ANSWER, None, message)) from None
        dumped: dict[str, Any] = answer.model_dump()
        return dumped

    return send


def transport_for(endpoint: ModelEndpoint) -> Transport:
    """The transport of an endpoint: HTTP to its `base_url`, or litellm for a model id."""
    return http_transport(endpoint) if endpoint.base_url else litellm_transport(endpoint)


def _error_message(raw: bytes) -> str:
    text = raw[:MAX_ANSWER_BYTES].decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except ValueError:
        return text[:MESSAGE_CHARS]
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:MESSAGE_CHARS]
    if isinstance(value, dict) and value.get("detail"):
        return str(value["detail"])[:MESSAGE_CHARS]
    return text[:MESSAGE_CHARS]


def _answer(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_ANSWER_BYTES:
        raise TransportFailure(Failure(BAD_ANSWER, 200, f"the answer is larger than {MAX_ANSWER_BYTES} bytes"))
    try:
        value = json.loads(raw)
    except ValueError:
        raise TransportFailure(Failure(BAD_ANSWER, 200, f"the answer is not JSON: {raw[:200]!r}")) from None
    if not isinstance(value, dict) or not isinstance(value.get("choices"), list) or not value["choices"]:
        raise TransportFailure(Failure(BAD_ANSWER, 200, f"the answer has no choices: {str(value)[:200]}"))
    return value


def say(line: str) -> None:
    """A visible line on stderr (a retry's wait)."""
    print(line, file=sys.stderr, flush=True)


class ModelClient:
    """Asks one endpoint for one agent: `label` names the agent in stderr lines, `record(kind, **fields)` (the
    trajectory's writer) receives each `retry` and `timeout`, `deadline` (a `time.monotonic()` value, None: none)
    is when the agent's wall clock runs out, and failure kinds in `give_up_on` are not retried (the preflight gives
    up on a refused connection at once), `cost` the agent's cost account (None: not priced). `transport`, `sleep`
    and `clock` are replaceable for tests."""

    def __init__(self, endpoint: ModelEndpoint, label: str, record: Callable[..., None] | None = None,
                 deadline: float | None = None, give_up_on: frozenset[str] = frozenset(),
                 transport: Transport | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, announce: Callable[[str], None] = say,
                 cost: AgentCost | None = None) -> None:
        self.endpoint, self.label, self.deadline, self.give_up_on = endpoint, label, deadline, give_up_on
        self.cost = cost
        self.record = record or (lambda kind, **fields: None)
        self.transport = transport or transport_for(endpoint)
        self.sleep, self.clock, self.announce = sleep, clock, announce
        self.retries = 0  # waits before another attempt, over every call
        self.timeouts = 0  # attempts that got no answer in time

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """The endpoint's answer to `request` (a chat-completion body without `model`).

        Raises:
            EndpointError: the call failed for good (see the module docstring).
            CostLimitReached: a cost cap is reached; no request was made.
        """
        if self.cost is not None:
            self.cost.check()
        answer = self._complete(request)
        if self.cost is not None:
            self.cost.add(answer.get("usage"))
        return answer

    @property
    def cost_usd(self) -> float | None:
        """What this client's answers cost (None: not priced)."""
        return None if self.cost is None else round(self.cost.spent, 6)

    def _complete(self, request: dict[str, Any]) -> dict[str, Any]:
        limits = self.endpoint.limits
        first_failed: float | None = None  # when the first failed attempt started: the retry window's start
        attempt = 0
        while True:
            started = self.clock()
            timeout = limits.request_timeout
            if first_failed is not None:
                timeout = min(timeout, max(1.0, first_failed + limits.retry_seconds - started))
            if self.deadline is not None:
                left = self.deadline - started
                if left <= 0:
                    raise EndpointError(Failure(DEADLINE, None, "the agent's wall clock (--agent-seconds) ran out"),
                                        attempt, started - (first_failed or started))
                timeout = min(timeout, left)
            attempt += 1
            try:
                return self.transport(request, timeout)
            except TransportFailure as exc:
                failure = exc.failure
            now = self.clock()
            if failure.kind == TIMEOUT:
                self.timeouts += 1
                self.record("timeout", attempt=attempt, timeout_seconds=round(timeout, 3), **failure.to_record())
                if self.deadline is not None and now >= self.deadline:
                    failure = Failure(DEADLINE, None, f"the agent's wall clock (--agent-seconds) ran out while the "
                                                      f"model was asked ({failure.message})")
            first_failed = started if first_failed is None else first_failed
            spent = now - first_failed
            wait = min(MAX_WAIT_SECONDS, FIRST_WAIT_SECONDS * 2 ** (attempt - 1))
            if failure.kind not in RETRIED_KINDS or failure.kind in self.give_up_on \
                    or spent + wait >= limits.retry_seconds \
                    or (self.deadline is not None and now + wait >= self.deadline):
                raise EndpointError(failure, attempt, spent)
            self.retries += 1
            self.record("retry", attempt=attempt, wait_seconds=wait, **failure.to_record())
            self.announce(f"model endpoint, {self.label}: {failure.kind}"
                          f"{f' ({failure.status})' if failure.status else ''}: {failure.message[:200]}; attempt "
                          f"{attempt + 1} in {wait:.0f} s ({limits.retry_seconds - spent:.0f} s of "
                          f"--endpoint-retry-seconds {limits.retry_seconds:.0f} left)")
            self.sleep(wait)
