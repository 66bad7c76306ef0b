"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that replays per-agent scripts: tests and demos
run the real client library and the real agent loop without a model.

A scripts file is a JSON object: a script name -> the list of assistant replies to give, in order. A reply is a
string (one bash command, sent as one `bash` tool call), or an object `{"content": "...", "commands": ["...", ...]}`
(one tool call per command; no commands makes a reply without a tool call, which agents reject as a format error).
An object may also carry `"after": "text"`: the reply is given only once the request's messages hold that text (a
scripted agent that waits for a teammate's message); until then each request gets the command `sleep 1` without
advancing the script, at most WAIT_REPLIES times (then a 400 answer says what never came). `"seconds": n` makes the
server answer that reply only after n seconds (a slow model, for time limits).

A reply may also be an endpoint failure, to test how clients bear one: `{"status": 500, "message": "..."}` answers
that request with that HTTP status and an OpenAI-style error (401, 404, a 400 whose message speaks of tool choice or
the context length ...), and `{"hang": true}` never answers it (the connection stays open until the server stops).
Each is one reply of the script: the next request gets the next reply.

The client names its agent in the request: the model `scripted/<name>` (or the header `X-Scripted-Agent: <name>`).
A name may have `/`-separated parts, most general last (the runner sends `<task>/<protocol>/<agent>`); the script
used is the first key found among the name and its tails (`<task>/<protocol>/<agent>`, `<protocol>/<agent>`,
`<agent>`), and each full name replays its script from the start, so one script serves the same agent in several
scenarios. A name with no script, or whose script is used up, gets a 400 answer saying so. Token counts are
approximate (characters / 4), but returned in the usage block as a real server does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL_PREFIX = "scripted/"
AGENT_HEADER = "X-Scripted-Agent"
MAX_REQUEST_BYTES = 64 << 20
WAIT_REPLIES = 120
WAIT_COMMAND = "sleep 1"
MAX_REPLY_SECONDS = 600


class ScriptError(ValueError):
    """A scripts file that cannot be replayed (not JSON, or a reply of the wrong shape)."""


@dataclass(frozen=True)
class Reply:
    """One assistant reply: its text and the bash commands it calls (one tool call each)."""

    content: str
    commands: tuple[str, ...]
    after: str = ""  # given only once the request's messages hold this text
    status: int = 200  # another status: the request is answered with this HTTP error and `content` as its message
    hang: bool = False  # the request is never answered
    seconds: float = 0.0  # how long the server takes to answer it


def parse_scripts(value: Any, where: str = "scripts") -> dict[str, tuple[Reply, ...]]:
    """Scripts from their JSON value (see the module docstring).

    Raises:
        ScriptError: naming the script and reply that is wrong, and what to give instead.
    """
    if not isinstance(value, dict) or not value:
        raise ScriptError(f"{where}: give a JSON object mapping each agent name to its list of replies")
    scripts = {}
    for name, replies in value.items():
        if not isinstance(replies, list):
            raise ScriptError(f"{where}: the script {name!r} must be a list of replies")
        scripts[name] = tuple(_reply(r, f"{where}: {name!r} reply {i + 1}") for i, r in enumerate(replies))
    return scripts


def load_scripts(path: Path) -> dict[str, tuple[Reply, ...]]:
    """The scripts of a JSON file (see `parse_scripts`).

    Raises:
        ScriptError: the file cannot be read, is not JSON, or holds a reply of the wrong shape.
    """
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScriptError(f"{path}: not a readable JSON scripts file ({exc})") from exc
    return parse_scripts(value, str(path))


def _reply(value: Any, where: str) -> Reply:
    if isinstance(value, str):
        return Reply("", (value,))
    if isinstance(value, dict) and set(value) == {"hang"} and value["hang"] is True:
        return Reply("", (), hang=True)
    if isinstance(value, dict) and "status" in value and set(value) <= {"status", "message"}:
        status, message = value["status"], value.get("message", "scripted failure")
        if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600 \
                and isinstance(message, str):
            return Reply(message, (), status=status)
        raise ScriptError(f"{where}: a failure reply is {{\"status\": an HTTP error status (400-599), \"message\": "
                          "text}")
    if isinstance(value, dict) and set(value) <= {"content", "commands", "after", "seconds"}:
        content, commands, after = value.get("content", ""), value.get("commands", []), value.get("after", "")
        seconds = value.get("seconds", 0)
        if isinstance(content, str) and isinstance(after, str) and isinstance(commands, list) \
                and all(isinstance(c, str) for c in commands) and isinstance(seconds, (int, float)) \
                and not isinstance(seconds, bool) and 0 <= seconds <= MAX_REPLY_SECONDS:
            return Reply(content, tuple(commands), after, seconds=float(seconds))
    raise ScriptError(f"{where}: give a bash command (a string) or {{\"content\": text, \"commands\": [strings], "
                      f"\"after\": text, \"seconds\": 0 to {MAX_REPLY_SECONDS} (each optional)}}")


def approximate_tokens(text: str) -> int:
    """A stand-in for a tokenizer: one token per four characters, at least one for any text."""
    return (len(text) + 3) // 4


class ScriptedServer:
    """`with ScriptedServer(scripts) as server:` serves `server.base_url` until the block ends."""

    def __init__(self, scripts: dict[str, tuple[Reply, ...]], port: int = 0) -> None:
        self.scripts = scripts
        self.served: dict[str, int] = {}  # full agent name -> replies given so far
        self.waited: dict[str, int] = {}  # full agent name -> `sleep 1` replies given while its next reply waits
        self.lock = threading.Lock()
        self.stopping = threading.Event()  # set when the server stops: requests left hanging end then
        self.requests = 0  # chat-completion requests received
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="scripted-server", daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients are given (`.../v1`)."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def replace_scripts(self, scripts: dict[str, tuple[Reply, ...]]) -> None:
        """Serve `scripts` from now on, every agent from its first reply (a server that was fixed)."""
        with self.lock:
            self.scripts, self.served, self.waited = scripts, {}, {}

    def next_reply(self, name: str, prompt: str = "") -> Reply:
        """The next reply of the agent `name` whose request holds `prompt` (a waiting reply gives `sleep 1`).

        Raises:
            LookupError: no script for the name, or its script is used up (the message says which).
        """
        parts = name.split("/")
        key = next(("/".join(parts[i:]) for i in range(len(parts)) if "/".join(parts[i:]) in self.scripts), None)
        if key is None:
            raise LookupError(f"no script for agent {name!r}: the scripts file has {sorted(self.scripts)}; add a "
                              f"key for it (its full name or its last part)")
        with self.lock:
            index = self.served.get(name, 0)
            if index >= len(self.scripts[key]):
                raise LookupError(f"the script {key!r} of agent {name!r} is used up: all {index} replies were given; "
                                  "add replies, or end the script with the agent's submit command")
            reply = self.scripts[key][index]
            if reply.after and reply.after not in prompt:
                waited = self.waited.get(name, 0)
                if waited >= WAIT_REPLIES:
                    raise LookupError(f"agent {name!r} waited {waited} replies for {reply.after!r}, which never came")
                self.waited[name] = waited + 1
                return Reply("", (WAIT_COMMAND,))
            self.served[name] = index + 1
        return reply


def completion(model: str, reply: Reply, prompt_tokens: int) -> dict[str, Any]:
    """A chat.completion object carrying `reply`, as an OpenAI-compatible server answers."""
    calls = [{"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": c})}} for c in reply.commands]
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if calls:
        message["tool_calls"] = calls
    completion_tokens = approximate_tokens(reply.content + "".join(reply.commands))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def prompt_text(messages: Any) -> str:
    """The text of a request's messages (string contents and text parts), for the prompt token count."""
    texts = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts)


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass  # requests are the test's business, not stderr's

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.rstrip("/").endswith("/models"):
                names = [{"id": f"{MODEL_PREFIX}{k}", "object": "model"} for k in sorted(server.scripts)]
                self._send(200, {"object": "list", "data": names})
            else:
                self._error(404, f"no such endpoint {self.path}; POST {server.base_url}/chat/completions")

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._error(404, f"no such endpoint {self.path}; POST {server.base_url}/chat/completions")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_REQUEST_BYTES:
                self._error(413, f"request larger than {MAX_REQUEST_BYTES} bytes")
                return
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                self._error(400, "the request body is not JSON")
                return
            if not isinstance(body, dict):
                self._error(400, "the request body must be a JSON object")
                return
            if body.get("stream"):
                self._error(400, "the scripted server does not stream; ask without stream=true")
                return
            model = str(body.get("model") or "")
            name = self.headers.get(AGENT_HEADER) or model.removeprefix(MODEL_PREFIX)
            prompt = prompt_text(body.get("messages"))
            with server.lock:
                server.requests += 1
            try:
                reply = server.next_reply(name, prompt)
            except LookupError as exc:
                self._error(400, str(exc), "script_exhausted")
                return
            if reply.hang:
                server.stopping.wait()
                self.close_connection = True
                return
            if reply.status != 200:
                self._error(reply.status, reply.content, "scripted_failure")
                return
            time.sleep(reply.seconds)
            self._send(200, completion(model, reply, approximate_tokens(prompt)))

        def _error(self, status: int, message: str, code: str = "bad_request") -> None:
            self._send(status, {"error": {"message": f"scripted server: {message}", "type": "invalid_request_error",
                                          "code": code}})

        def _send(self, status: int, value: dict[str, Any]) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
