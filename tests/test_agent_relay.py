"""The model relay of in-container agents, without containers: `ModelRelay` against real HTTP servers (the scripted
server, and a server that records what reaches it), and the in-container pieces run here as processes: the relay
bridge serving real HTTP on the loopback, the example shell agent asking it, the host side answering its lines."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from asyncodebench.agents import cli_agent
from asyncodebench.agents.adapter import INBOX_HEADER, Inbox, ModelEndpoint
from asyncodebench.agents.cli_agent import Ended
from asyncodebench.agents.relay import ModelRelay
from asyncodebench.agents.scripted_server import ScriptedServer, parse_scripts
from asyncodebench.agents.trajectory import TrajectoryWriter, read_trajectory

INCONTAINER = Path(cli_agent.__file__).parent / "incontainer"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def request(*messages: dict[str, Any], **extra: Any) -> bytes:
    return json.dumps({"model": "whatever-the-agent-says", "messages": list(messages), **extra}).encode()


USER = {"role": "user", "content": "fix the bug"}


class Recorder(BaseHTTPRequestHandler):
    """An upstream that records each request's headers and body and answers one fixed completion."""

    seen: list[tuple[dict[str, str], dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((dict(self.headers), body))
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}],
                           "usage": {"prompt_tokens": 7, "completion_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def recorder() -> Iterator[ThreadingHTTPServer]:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def relay_for(base_url: str, name: str, budget: int, path: Path, key_env: str | None = None) -> ModelRelay:
    return ModelRelay(ModelEndpoint(name, base_url, key_env), budget, TrajectoryWriter(path))


def test_the_key_model_and_parameters_are_the_hosts(recorder: ThreadingHTTPServer, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_TEST_KEY", "sk-host-only")
    url = f"http://127.0.0.1:{recorder.server_address[1]}/v1"
    relay = relay_for(url, "the-endpoints-model", 5, tmp_path / "t.jsonl", "RELAY_TEST_KEY")
    status, answer = relay.handle("POST", "/v1/chat/completions",
                                  request(USER, n=5, user="x", temperature=0.2, extra_body={"a": 1}))
    assert (status, answer["usage"]["prompt_tokens"]) == (200, 7)
    ((headers, body),) = Recorder.seen
    assert headers["Authorization"] == "Bearer sk-host-only"
    assert body == {"messages": [USER], "temperature": 0.2, "model": "the-endpoints-model"}
    assert relay.usage.responses == 1 and relay.usage.total_tokens == 9


def test_the_budget_is_enforced_and_recorded(tmp_path: Path) -> None:
    scripts = parse_scripts({"agent": ["ls", "ls", "ls", "ls"]})
    with ScriptedServer(scripts) as server:
        relay = relay_for(server.base_url, "scripted/t/single/agent", 2, tmp_path / "t.jsonl")
        answers = [relay.handle("POST", "/v1/chat/completions", request(USER)) for _ in range(4)]
        assert server.served == {"t/single/agent": 2}  # the refused requests never reached the endpoint
    assert [status for status, _ in answers] == [200, 200, 429, 429]
    assert answers[2][1]["error"]["code"] == "budget_exhausted"
    assert "budget of 2 model responses" in answers[2][1]["error"]["message"]
    assert relay.usage.responses == 2 and relay.budget_spent
    relay.writer.close()
    kinds = [line["type"] for line in read_trajectory(tmp_path / "t.jsonl")]
    assert kinds == ["message", "response", "message", "response", "error", "error"]  # a shorter history: anew


@pytest.mark.parametrize("method, path, body, status, words", [
    ("GET", "/v1/models", b"", 404, "serves only POST"),
    ("POST", "/v1/embeddings", request(USER), 404, "serves only POST"),
    ("POST", "/v1/chat/completions", b"[1]", 400, "list of `messages`"),
    ("POST", "/v1/chat/completions", b"\xff", 400, "list of `messages`"),
    ("POST", "/v1/chat/completions", request(USER, stream=True), 400, "does not stream"),
])
def test_requests_other_than_a_completion_are_refused_without_a_call(
        recorder: ThreadingHTTPServer, tmp_path: Path, method: str, path: str, body: bytes, status: int,
        words: str) -> None:
    relay = relay_for(f"http://127.0.0.1:{recorder.server_address[1]}/v1", "m", 5, tmp_path / "t.jsonl")
    got, answer = relay.handle(method, path, body)
    assert got == status and words in answer["error"]["message"]
    assert Recorder.seen == [] and relay.usage.responses == 0


def test_endpoint_errors_pass_through_and_stop_after_a_limit(tmp_path: Path) -> None:
    with ScriptedServer(parse_scripts({"other": ["ls"]})) as server:
        relay = relay_for(server.base_url, "scripted/nobody", 50, tmp_path / "t.jsonl")
        answers = [relay.handle("POST", "/v1/chat/completions", request(USER)) for _ in range(11)]
    assert [s for s, _ in answers] == [400] * 10 + [503]
    assert "no script for agent 'nobody'" in answers[0][1]["error"]["message"]
    assert answers[-1][1]["error"]["code"] == "too_many_errors" and relay.usage.responses == 0


def test_only_new_messages_are_recorded_and_observations_name_their_command(tmp_path: Path) -> None:
    with ScriptedServer(parse_scripts({"a": ["ls -la", SUBMIT]})) as server:
        relay = relay_for(server.base_url, "scripted/a", 5, tmp_path / "t.jsonl")
        system = {"role": "system", "content": "be brief"}
        _, first = relay.handle("POST", "/v1/chat/completions", request(system, USER))
        reply = first["choices"][0]["message"]
        call_id = reply["tool_calls"][0]["id"]
        observation = {"role": "tool", "tool_call_id": call_id, "content": "total 0"}
        relay.handle("POST", "/v1/chat/completions", request(system, USER, reply, observation))
    relay.writer.close()
    lines = read_trajectory(tmp_path / "t.jsonl")
    assert [line["type"] for line in lines] == ["message", "message", "response", "observation", "response"]
    assert lines[2]["commands"] == ["ls -la"] and lines[2]["prompt_tokens"] > 0
    assert (lines[3]["command"], lines[3]["output"]) == ("ls -la", "total 0")


def test_manager_messages_reach_the_model_at_their_place_in_every_later_request(
        recorder: ThreadingHTTPServer, tmp_path: Path) -> None:
    delivered: list[str] = []
    inbox = Inbox(on_delivered=delivered.append)
    relay = ModelRelay(ModelEndpoint("m", f"http://127.0.0.1:{recorder.server_address[1]}/v1", None), 2,
                       TrajectoryWriter(tmp_path / "t.jsonl"), inbox=inbox)
    reply = {"role": "assistant", "content": "hi"}
    tool = {"role": "tool", "tool_call_id": "c1", "content": "done"}
    assert inbox.post("core_agent finished: minicache/core.py is in")
    relay.handle("POST", "/v1/chat/completions", request(USER))
    relay.handle("POST", "/v1/chat/completions", request(USER, reply, tool))
    assert inbox.post("too late: the budget is spent")
    status, _ = relay.handle("POST", "/v1/chat/completions", request(USER, reply, tool, reply, tool))
    relay.writer.close()
    shown = {"role": "user", "content": f"{INBOX_HEADER}\ncore_agent finished: minicache/core.py is in"}
    assert [body["messages"] for _, body in Recorder.seen] == [[USER, shown], [USER, shown, reply, tool]]
    assert status == 429 and delivered == ["core_agent finished: minicache/core.py is in"]
    assert inbox.close() == ["too late: the budget is spent"]  # never shown: recorded as undelivered
    lines = read_trajectory(tmp_path / "t.jsonl")
    assert [line["type"] for line in lines] == ["message", "inbox", "response", "observation", "response", "error"]
    assert lines[1]["content"] == "core_agent finished: minicache/core.py is in"


class Pipe:
    """The host's end of the bridge's stdin, as the Docker exec socket is."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def sendall(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()


def bridge_run(tmp_path: Path, scripts: dict[str, list[Any]], budget: int) -> tuple[Ended, ModelRelay, str]:
    """The bridge and the shell agent as processes here (in `tmp_path`), answered by a relay to a scripted server."""
    instruction = tmp_path / "instruction.md"
    instruction.write_text("Say done.")
    with ScriptedServer(parse_scripts(scripts)) as server:
        relay = relay_for(server.base_url, "scripted/t/single/agent", budget, tmp_path / "t.jsonl")
        process = subprocess.Popen(
            [sys.executable, "-I", str(INCONTAINER / "relay_bridge.py"), "--", sys.executable, "-I",
             str(INCONTAINER / "shell_agent.py"), "--instruction", str(instruction), "--command-timeout", "20"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        ended = Ended()
        assert process.stdout is not None and process.stderr is not None
        for line in process.stdout:
            cli_agent._answer(line.rstrip(b"\n"), relay, Pipe(process), ended)
        stderr = process.stderr.read().decode()
        assert process.wait(30) == 0
    relay.writer.close()
    return ended, relay, stderr


def test_the_shell_agent_works_through_the_bridge_until_it_submits(tmp_path: Path) -> None:
    ended, relay, _ = bridge_run(tmp_path, {"agent": ["echo hello > made.txt", "cat made.txt", SUBMIT]}, 5)
    assert ended.agent_code == 0 and relay.usage.responses == 3 and not relay.budget_spent
    assert (tmp_path / "made.txt").read_text() == "hello\n"
    lines = read_trajectory(tmp_path / "t.jsonl")
    observations = [line for line in lines if line["type"] == "observation"]
    assert [o["command"] for o in observations] == ["echo hello > made.txt", "cat made.txt"]
    assert observations[1]["output"] == "<exit_code>0</exit_code>\n<output>\nhello\n</output>"


def test_the_shell_agent_stops_when_the_relay_says_the_budget_is_spent(tmp_path: Path) -> None:
    ended, relay, stderr = bridge_run(tmp_path, {"agent": ["true"] * 10}, 3)
    assert ended.agent_code == 3 and relay.usage.responses == 3 and relay.budget_refusals == 1
    assert "budget of 3 model responses" in stderr


def test_the_shell_agent_gives_up_after_replies_without_a_command(tmp_path: Path) -> None:
    ended, relay, stderr = bridge_run(tmp_path, {"agent": [{"content": "hmm", "commands": []}] * 5}, 10)
    assert ended.agent_code == 5 and relay.usage.responses == 3
    assert "3 replies in a row without a command" in stderr


def test_the_runs_sampling_parameters_reach_the_endpoint_by_every_path(recorder: ThreadingHTTPServer,
                                                                       tmp_path: Path) -> None:
    """--temperature, --max-tokens and --seed: through the relay (over what the in-container agent asked) and
    through litellm as mini-swe-agent's model and the manager call it (ModelEndpoint.litellm_args)."""
    import litellm

    url = f"http://127.0.0.1:{recorder.server_address[1]}/v1"
    endpoint = ModelEndpoint("m", url, None, temperature=0.0, max_tokens=64, seed=7)
    relay = ModelRelay(endpoint, 5, TrajectoryWriter(tmp_path / "t.jsonl"))
    status, _ = relay.handle("POST", "/v1/chat/completions", request(USER, temperature=0.9, max_tokens=9000))
    relay.writer.close()
    name, kwargs = endpoint.litellm_args()
    litellm.completion(model=name, messages=[USER], **kwargs)
    sent = [{k: body.get(k) for k in ("temperature", "max_tokens", "seed")} for _, body in Recorder.seen]
    assert status == 200 and sent == [{"temperature": 0.0, "max_tokens": 64, "seed": 7}] * 2
    assert ModelEndpoint("m", url).sampling() == {} and "temperature" not in ModelEndpoint("m").litellm_args()[1]
