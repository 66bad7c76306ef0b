"""The one model client of the runner (asyncodebench/agents/model_client.py) and the run's preflight, without
containers: the retry policy against a transport that fails on demand (a clock and a sleep of the test's own, so
nothing depends on time), the HTTP transport and the preflight against the real scripted server answering the
failures a real endpoint gives (401, 404, a 400 about tool choice or the context length, 500, a request never
answered) and a port nobody listens on, the manager and the relay through the client, and unusable replies kept
as the model sent them (mini-swe-agent's loop on a local work tree, the relay)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from asyncodebench.agents.adapter import AgentSpec, CallLimits, CommandResult, ModelEndpoint
from asyncodebench.agents.manager import PLAN, Manager, ManagerLimits, Team
from asyncodebench.agents.miniswe import unusable_reply
from asyncodebench.agents.model_client import (
    AUTH,
    CONTEXT_WINDOW,
    NOT_FOUND,
    REFUSED,
    SERVER_ERROR,
    TIMEOUT,
    TOOLS_UNSUPPORTED,
    EndpointError,
    Failure,
    ModelClient,
    TransportFailure,
    http_transport,
)
from asyncodebench.agents.preflight import PreflightError, check_endpoint
from asyncodebench.agents.relay import ModelRelay
from asyncodebench.agents.scripted_server import ScriptedServer, parse_scripts
from asyncodebench.agents.trajectory import TrajectoryWriter, read_trajectory

TOOLS_MESSAGE = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
CONTEXT_MESSAGE = ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens. "
                   "Please reduce the length of the messages.")
ANSWER = {"choices": [{"message": {"role": "assistant", "content": "ok"}}], "usage": {"prompt_tokens": 3}}


class Clock:
    """Time as the test moves it: `sleep` and each attempt advance it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Flaky:
    """A transport failing with `failures` in order, then answering; each attempt takes `seconds` of the clock."""

    def __init__(self, clock: Clock, *failures: Failure, seconds: float = 0.0) -> None:
        self.clock, self.failures, self.seconds = clock, list(failures), seconds
        self.timeouts: list[float] = []

    def __call__(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.timeouts.append(timeout)
        self.clock.now += self.seconds
        if self.failures:
            raise TransportFailure(self.failures.pop(0))
        return ANSWER


def client(transport: Flaky, clock: Clock, limits: CallLimits = CallLimits(30, 100, None),
           deadline: float | None = None, records: list[tuple[str, dict[str, Any]]] | None = None,
           lines: list[str] | None = None) -> ModelClient:
    return ModelClient(ModelEndpoint("m", "http://unused/v1", None, limits), "scenario agent",
                       lambda kind, **fields: (records if records is not None else []).append((kind, fields)),
                       deadline, transport=transport, sleep=clock.sleep, clock=lambda: clock.now,
                       announce=(lines if lines is not None else []).append)


def test_transport_errors_are_retried_with_exponential_waits_each_said_and_recorded() -> None:
    clock, records, lines = Clock(), [], []
    down = Failure(SERVER_ERROR, 500, "internal error")
    made = client(Flaky(clock, down, down, Failure(REFUSED, None, "refused"), down), clock, records=records,
                  lines=lines)
    assert made.complete({"messages": []}) == ANSWER
    assert clock.slept == [1, 2, 4, 8] and made.retries == 4
    assert [kind for kind, _ in records] == ["retry"] * 4
    assert records[0][1] == {"attempt": 1, "wait_seconds": 1, "failure": "server_error", "status": 500,
                             "message": "internal error"}
    assert len(lines) == 4 and "scenario agent: server_error (500): internal error; attempt 2 in 1 s" in lines[0]
    assert "--endpoint-retry-seconds 100 left" in lines[0]


def test_a_failure_no_retry_can_change_ends_the_call_at_once() -> None:
    for kind, status in ((AUTH, 401), (NOT_FOUND, 404), (TOOLS_UNSUPPORTED, 400)):
        clock = Clock()
        made = client(Flaky(clock, Failure(kind, status, "no")), clock)
        with pytest.raises(EndpointError) as raised:
            made.complete({"messages": []})
        assert (raised.value.failure.kind, raised.value.attempts, clock.slept) == (kind, 1, [])
        assert raised.value.termination_reason == "provider_or_transport_error"
    clock = Clock()
    with pytest.raises(EndpointError) as raised:
        client(Flaky(clock, Failure(CONTEXT_WINDOW, 400, "too long")), clock).complete({"messages": []})
    assert raised.value.termination_reason == "context_window_error"


def test_retries_stop_within_the_retry_window_and_the_call_is_a_provider_error() -> None:
    clock = Clock()
    failures = [Failure(SERVER_ERROR, 503, "down")] * 50
    made = client(Flaky(clock, *failures, seconds=0.5), clock, CallLimits(30, 20, None))
    with pytest.raises(EndpointError) as raised:
        made.complete({"messages": []})
    assert raised.value.termination_reason == "provider_or_transport_error"
    assert clock.slept == [1, 2, 4, 8] and raised.value.attempts == 5  # 1+2+4+8 s waits, 2.5 s of attempts
    assert clock.now <= 20


def test_each_attempt_is_bounded_by_the_request_timeout_the_window_and_the_agent_clock() -> None:
    clock, records = Clock(), []
    hung = Failure(TIMEOUT, None, "no answer")
    transport = Flaky(clock, hung, hung, hung, seconds=10)
    with pytest.raises(EndpointError) as raised:
        client(transport, clock, CallLimits(10, 25, None), records=records).complete({"messages": []})
    assert transport.timeouts == [10, 10, 2]  # the last attempt gets what is left of the 25 s window after waits
    assert [kind for kind, _ in records] == ["timeout", "retry", "timeout", "retry", "timeout"]
    assert raised.value.failure.kind == TIMEOUT and made_reason(raised.value) == "provider_or_transport_error"

    clock = Clock()
    transport = Flaky(clock, hung, seconds=7)
    with pytest.raises(EndpointError) as raised:
        client(transport, clock, CallLimits(600, 600, None), deadline=7).complete({"messages": []})
    assert transport.timeouts == [7]  # what was left of the agent's clock
    assert made_reason(raised.value) == "wall_clock_timeout"


def made_reason(error: EndpointError) -> str:
    return error.termination_reason


@pytest.fixture
def failing_server() -> Any:
    """The scripted server, whose model `m` gives the replies a test sets with `replace_scripts`."""
    with ScriptedServer(parse_scripts({"m": ["true"]})) as server:
        yield server


def endpoint(server: ScriptedServer, limits: CallLimits = CallLimits(5, 3, None)) -> ModelEndpoint:
    return ModelEndpoint("scripted/m", server.base_url, None, limits)


def serve(server: ScriptedServer, *replies: Any) -> None:
    server.replace_scripts(parse_scripts({"m": list(replies)}))


@pytest.mark.parametrize(("reply", "kind"), [
    ({"status": 401, "message": "Incorrect API key provided"}, AUTH),
    ({"status": 403, "message": "forbidden"}, AUTH),
    ({"status": 404, "message": "The model `m` does not exist."}, NOT_FOUND),
    ({"status": 400, "message": TOOLS_MESSAGE}, TOOLS_UNSUPPORTED),
    ({"status": 400, "message": CONTEXT_MESSAGE}, CONTEXT_WINDOW),
])
def test_the_http_transport_names_each_failure_of_a_real_server(failing_server: ScriptedServer, reply: Any,
                                                                 kind: str) -> None:
    serve(failing_server, reply)
    with pytest.raises(TransportFailure) as raised:
        http_transport(endpoint(failing_server))({"messages": [{"role": "user", "content": "hi"}]}, 5)
    assert (raised.value.failure.kind, raised.value.failure.status) == (kind, reply["status"])
    assert reply["message"] in raised.value.failure.message


def test_a_500_is_retried_against_the_real_server_and_the_next_reply_is_used(failing_server: ScriptedServer,
                                                                            tmp_path: Path) -> None:
    serve(failing_server, {"status": 500, "message": "boom"}, "ls")
    records: list[tuple[str, dict[str, Any]]] = []
    made = ModelClient(endpoint(failing_server, CallLimits(5, 30, None)), "agent",
                       lambda kind, **fields: records.append((kind, fields)), announce=lambda line: None)
    answer = made.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert json.loads(answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}
    assert [(kind, fields["status"]) for kind, fields in records] == [("retry", 500)]


def test_a_request_never_answered_times_out_and_is_recorded(failing_server: ScriptedServer) -> None:
    serve(failing_server, {"hang": True}, {"hang": True}, {"hang": True})
    records: list[tuple[str, dict[str, Any]]] = []
    made = ModelClient(endpoint(failing_server, CallLimits(1, 2, None)), "agent",
                       lambda kind, **fields: records.append((kind, fields)), announce=lambda line: None)
    with pytest.raises(EndpointError) as raised:
        made.complete({"messages": [{"role": "user", "content": "hi"}]})
    assert raised.value.failure.kind == TIMEOUT and made.timeouts >= 1
    assert records[0][0] == "timeout" and records[0][1]["timeout_seconds"] == 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("reply", "says", "configuration"), [
    ({"status": 401, "message": "Incorrect API key provided"}, "put the endpoint's key in the environment variable "
                                                               "OPENAI_API_KEY", True),
    ({"status": 404, "message": "no such model"}, "give --model as the server lists it at", True),
    ({"status": 400, "message": TOOLS_MESSAGE}, "--enable-auto-tool-choice", True),
    ({"status": 500, "message": "boom"}, "a longer --endpoint-retry-seconds waits longer", False),
])
def test_the_preflight_names_the_cause_and_the_fix(failing_server: ScriptedServer, reply: Any, says: str,
                                                   configuration: bool) -> None:
    serve(failing_server, *[reply] * 10)
    failing = ModelEndpoint("scripted/m", failing_server.base_url, "OPENAI_API_KEY", CallLimits(5, 2, None))
    with pytest.raises(PreflightError) as raised:
        check_endpoint(failing)
    assert says in str(raised.value) and raised.value.configuration is configuration


def test_the_preflight_gives_up_at_once_when_nothing_listens() -> None:
    nowhere = ModelEndpoint("m", f"http://127.0.0.1:{free_port()}/v1", None, CallLimits(5, 600, None))
    with pytest.raises(PreflightError) as raised:
        check_endpoint(nowhere)
    assert raised.value.configuration and "nothing listens at" in str(raised.value)
    assert "give --base-url its host, port and path" in str(raised.value)


def test_the_preflight_passes_a_tool_call_and_notes_an_answer_without_one(failing_server: ScriptedServer) -> None:
    serve(failing_server, "true", {"content": "I would rather talk."})
    assert check_endpoint(endpoint(failing_server)).tool_called
    found = check_endpoint(endpoint(failing_server))
    assert not found.tool_called and "without a tool call" in found.note


def test_the_manager_retries_through_the_client_and_a_manager_never_reached_is_a_provider_error(
        failing_server: ScriptedServer, tmp_path: Path) -> None:
    serve(failing_server, {"status": 500, "message": "boom"}, {"content": json.dumps({"actions": []})})
    made = Manager(endpoint(failing_server, CallLimits(5, 30, None)), ManagerLimits(2, 3, None, None, 2),
                   Team(("a", "b"), 2), "system", tmp_path / "t" / "trajectories" / "manager.jsonl",
                   lambda event, **fields: None)
    assert made.decide("event", PLAN) == [] and made.stopped is None
    run = made.finish()
    assert (run.termination_reason, run.usage.responses, run.retries) == ("adapter_completed", 1, 1)
    kinds = [line["type"] for line in read_trajectory(tmp_path / "t" / "trajectories" / "manager.jsonl")]
    assert kinds == ["message", "message", "retry", "response", "summary"]

    serve(failing_server, *[{"status": 503, "message": "down"}] * 10)
    events: list[str] = []
    made = Manager(endpoint(failing_server, CallLimits(5, 2, None)), ManagerLimits(2, 3, None, None, 2),
                   Team(("a", "b"), 2), "system", tmp_path / "u" / "trajectories" / "manager.jsonl",
                   lambda event, **fields: events.append(event))
    assert made.decide("event", PLAN) == []
    assert events == ["manager_failed"] and made.finish().termination_reason == "provider_or_transport_error"


def test_an_unusable_reply_is_kept_raw_and_bounded() -> None:
    response = {"choices": [{"message": {"content": "x" * 20_000, "tool_calls": [
        {"function": {"name": "python", "arguments": "{broken"}}]}, "finish_reason": "tool_calls"}]}
    kept = unusable_reply(response)
    assert len(kept["content"]) == 8_000 and kept["finish_reason"] == "tool_calls"
    assert kept["tool_calls"] == [{"name": "python", "arguments": "{broken"}]


class Unusable(BaseHTTPRequestHandler):
    """An upstream answering its first request with a 500, then with a call of an unknown tool whose arguments are
    not JSON."""

    served = 0

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        Unusable.served += 1
        if Unusable.served == 1:
            status, body = 500, {"error": {"message": "warming up"}}
        else:
            status, body = 200, {"choices": [{"message": {"role": "assistant", "content": "running it", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "python", "arguments": "{broken"}}]}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_the_relay_retries_through_the_client_and_keeps_unusable_tool_calls_as_sent(tmp_path: Path) -> None:
    Unusable.served = 0
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Unusable)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
        relay = ModelRelay(ModelEndpoint("m", url, None, CallLimits(5, 30, None)), 5,
                           TrajectoryWriter(tmp_path / "t.jsonl"))
        relay.client.announce = lambda line: None
        body = json.dumps({"messages": [{"role": "user", "content": "go"}]}).encode()
        status, _ = relay.handle("POST", "/v1/chat/completions", body)
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert status == 200 and relay.client.retries == 1 and relay.failures == []
    lines = read_trajectory(tmp_path / "t.jsonl")
    (retry,) = [t for t in lines if t["type"] == "retry"]
    assert (retry["failure"], retry["status"], retry["message"]) == ("server_error", 500, "warming up")
    (response,) = [t for t in lines if t["type"] == "response"]
    assert response["unusable_tool_calls"] == [{"name": "python", "arguments": "{broken"}]


class LocalWorkspace:
    """A work tree on this machine: the agent loop needs somewhere to run its commands, and this test is about what
    its trajectory records of the model, not about containers."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = str(workdir)

    def execute(self, command: str, timeout: float | None = None) -> CommandResult:
        done = subprocess.run(["bash", "-c", command], cwd=self.workdir, capture_output=True, text=True,
                              timeout=timeout or 60)
        return CommandResult(done.stdout + done.stderr, done.returncode, 0.0, False)


def test_mini_swe_agent_keeps_a_prose_reply_as_the_model_sent_it(tmp_path: Path) -> None:
    from asyncodebench.agents.miniswe import SUBMIT, MiniSweAgent

    scripts = parse_scripts({"a": [{"content": "I think the cache needs a lock."}, f"echo {SUBMIT}"]})
    with ScriptedServer(scripts) as server:
        trajectory = tmp_path / "scenario" / "trajectories" / "a.jsonl"
        spec = AgentSpec("a", "single", (), "fix it", ModelEndpoint("scripted/a", server.base_url, None,
                                                                      CallLimits(5, 5, 600)), trajectory)
        run = MiniSweAgent().run(spec, LocalWorkspace(tmp_path), 5)
    assert (run.termination_reason, run.usage.responses, run.retries) == ("agent_finish", 2, 0)
    (error,) = [t for t in read_trajectory(trajectory) if t["type"] == "format_error"]
    assert error["reply"] == {"content": "I think the cache needs a lock.", "tool_calls": [],
                              "finish_reason": "stop"}
    summary = read_trajectory(trajectory)[-1]
    assert summary["model_calls"] == {"retries": 0, "timeouts": 0, "limits": {
        "request_timeout": 5, "retry_seconds": 5, "agent_seconds": 600}}


def test_the_preflight_gives_up_at_once_on_a_host_that_cannot_be_reached() -> None:
    unreachable = ModelEndpoint("m", "http://no-such-host.invalid:8000/v1", None, CallLimits(5, 600, None))
    with pytest.raises(PreflightError) as raised:
        check_endpoint(unreachable)
    assert raised.value.configuration and "cannot be reached" in str(raised.value)
