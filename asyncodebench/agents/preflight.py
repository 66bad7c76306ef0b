"""The run's preflight: before the first scenario, one minimal request to the endpoint with the run's settings (its
model, its key, a `bash` tool), so that a configuration that cannot work stops the run at once with its cause and
its fix instead of finishing every scenario as a model failure.

A refused key, an unknown model, nothing listening (or a host that cannot be reached) and a server without tool
calls are configuration errors (`PreflightError.configuration`); an endpoint that keeps failing for another reason
through the retry window is an infrastructure one. An answer without a tool call is said, not refused (a model may
ignore a tool once).
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncodebench.agents.adapter import ModelEndpoint
from asyncodebench.agents.model_client import (
    AUTH,
    BAD_REQUEST,
    CONTEXT_WINDOW,
    NOT_FOUND,
    REFUSED,
    TOOLS_UNSUPPORTED,
    UNREACHABLE,
    EndpointError,
    ModelClient,
    Transport,
)

PREFLIGHT_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a bash command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
PREFLIGHT_REQUEST = {
    "messages": [{"role": "user", "content": "A connection check: call the bash tool with the command `true`."}],
    "tools": [PREFLIGHT_TOOL], "max_tokens": 512}
CONFIGURATION_KINDS = frozenset({AUTH, NOT_FOUND, REFUSED, UNREACHABLE, TOOLS_UNSUPPORTED, BAD_REQUEST,
                                 CONTEXT_WINDOW})


class PreflightError(Exception):
    """The endpoint cannot serve the run; `configuration`: the command or the server's setup must change."""

    def __init__(self, message: str, configuration: bool) -> None:
        super().__init__(message)
        self.configuration = configuration


@dataclass(frozen=True)
class Preflight:
    """What the preflight found: whether the answer called the tool, and the note to show when it did not."""

    tool_called: bool
    note: str = ""


def check_endpoint(endpoint: ModelEndpoint, transport: Transport | None = None) -> Preflight:
    """One request as the agents will make it.

    Raises:
        PreflightError: naming the cause and the fix.
    """
    # Nothing listening, or a host that cannot be reached, is a wrong --base-url far more often than a passing fault.
    client = ModelClient(endpoint, "preflight", give_up_on=frozenset({REFUSED, UNREACHABLE}), transport=transport)
    try:
        answer = client.complete(PREFLIGHT_REQUEST)
    except EndpointError as exc:
        kind = exc.failure.kind
        raise PreflightError(f"preflight: {_cause(endpoint, kind)} ({exc}); {_fix(endpoint, kind)}",
                             kind in CONFIGURATION_KINDS) from exc
    choice = answer["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if isinstance(message, dict) and message.get("tool_calls"):
        return Preflight(True)
    return Preflight(False, f"preflight: {endpoint.name} answered a request to call a tool without a tool call; "
                            "agents act only through tool calls, so if the server ignores tools (vLLM without "
                            "--enable-auto-tool-choice --tool-call-parser ...) every reply will be a format error")


def _where(endpoint: ModelEndpoint) -> str:
    return endpoint.base_url or f"litellm's provider for {endpoint.name}"


def _cause(endpoint: ModelEndpoint, kind: str) -> str:
    return {
        AUTH: f"{_where(endpoint)} refused the key",
        NOT_FOUND: f"{_where(endpoint)} does not know the model {endpoint.name!r} (or has no /chat/completions there)",
        REFUSED: f"nothing listens at {_where(endpoint)}",
        UNREACHABLE: f"{_where(endpoint)} cannot be reached",
        TOOLS_UNSUPPORTED: f"{_where(endpoint)} does not accept tool calls",
        BAD_REQUEST: f"{_where(endpoint)} rejected a minimal chat-completion request",
        CONTEXT_WINDOW: f"{_where(endpoint)} found a one-line prompt too long for its context window",
    }.get(kind, f"{_where(endpoint)} gave no usable answer within --endpoint-retry-seconds "
                f"({endpoint.limits.retry_seconds:.0f} s)")


def _fix(endpoint: ModelEndpoint, kind: str) -> str:
    key = endpoint.api_key_env or ("OPENAI_API_KEY" if endpoint.base_url else "the provider's usual key variable")
    if kind == AUTH:
        return f"put the endpoint's key in the environment variable {key} (--api-key-env names another variable)"
    if kind == NOT_FOUND:
        if endpoint.base_url:
            return (f"give --model as the server lists it at {endpoint.base_url.rstrip('/')}/models, and a --base-url "
                    "that ends where /chat/completions is served (usually .../v1)")
        return "give a litellm model id, such as anthropic/claude-sonnet-4-5, or --base-url for your own server"
    if kind in (REFUSED, UNREACHABLE):
        return "start the model server, or give --base-url its host, port and path (e.g. http://127.0.0.1:8000/v1)"
    if kind == TOOLS_UNSUPPORTED:
        return ("agents act through a bash tool: start vLLM with --enable-auto-tool-choice and the --tool-call-parser "
                "of the model (SGLang: --tool-call-parser), or use a server and model that support tool calls")
    if kind in (BAD_REQUEST, CONTEXT_WINDOW):
        return "check that --base-url and --model name an OpenAI-compatible chat model"
    return "check the server's health and rerun; a longer --endpoint-retry-seconds waits longer for it"
