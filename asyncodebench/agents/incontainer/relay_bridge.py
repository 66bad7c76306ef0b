"""The in-container end of the model relay: serves an OpenAI-compatible endpoint on the container's own loopback
and carries each request to the host over this process's stdin and stdout, then runs the agent's command.

Started by the host (`cli_agent.py`) as the sandbox user, `python3 -I relay_bridge.py -- AGENT ARGV...`, with its
stdin and stdout attached to the host: the container has no network, so this pipe is the only way out, and the
host relay decides what it carries (the model, the budget, the key). Standard library only, Python >= 3.6.

Wire format, one JSON object per line: to the host `{"kind": "request", "id", "method", "path", "body"}` and, when
the agent's command has ended, `{"kind": "exit", "code"}`; from the host `{"id", "status", "body"}`. The agent gets
OPENAI_BASE_URL (http://127.0.0.1:PORT/v1), OPENAI_API_KEY (a placeholder: the key stays on the host) and
ASYNCODEBENCH_RELAY_URL; its stdout and stderr go to this process's stderr, never to the host's channel.
"""

import json
import os
import socketserver
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

MAX_REQUEST_BYTES = 16 << 20
PLACEHOLDER_KEY = "asyncodebench-relay-holds-the-key"


class Channel:
    """Requests out on stdout, answers in on stdin, matched by id."""

    def __init__(self, out, into):
        self.out, self.into = out, into
        self.lock = threading.Lock()
        self.waiting = {}
        self.answers = {}
        self.next_id = 0
        self.closed = False

    def send(self, frame):
        """Write one line to the host."""
        with self.lock:
            self.out.write(json.dumps(frame).encode() + b"\n")
            self.out.flush()

    def ask(self, method, path, body):
        """The host's (status, body bytes) for one request; 502 when the host is gone."""
        event = threading.Event()
        with self.lock:
            self.next_id += 1
            frame_id = self.next_id
            self.waiting[frame_id] = event
        try:
            self.send({"kind": "request", "id": frame_id, "method": method, "path": path,
                       "body": body.decode("utf-8", "replace")})
        except OSError:
            return 502, b'{"error": {"message": "the host relay is gone"}}'
        while not event.wait(1):
            if self.closed:
                return 502, b'{"error": {"message": "the host relay is gone"}}'
        status, answer = self.answers.pop(frame_id)
        return status, answer.encode()

    def read_answers(self):
        """Hand each answer from the host to the request waiting for it, until the host closes stdin."""
        for line in self.into:
            try:
                frame = json.loads(line)
                status, body, frame_id = int(frame["status"]), str(frame["body"]), frame["id"]
            except (ValueError, KeyError, TypeError):
                continue
            with self.lock:
                event = self.waiting.pop(frame_id, None)
            if event is not None:
                self.answers[frame_id] = (status, body)
                event.set()
        self.closed = True


def handler_for(channel):
    """The HTTP handler class that carries every request over `channel`."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

        def do_GET(self):  # noqa: N802 - http.server's naming
            self.relay(b"")

        def do_POST(self):  # noqa: N802
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_REQUEST_BYTES:
                self.answer(413, b'{"error": {"message": "give a Content-Length of at most 16 MiB"}}')
                return
            self.relay(self.rfile.read(length))

        def relay(self, body):
            status, answer = channel.ask(self.command, self.path, body)
            self.answer(status, answer)

        def answer(self, status, data):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class Server(socketserver.ThreadingMixIn, HTTPServer):
    """One thread per connection: the agent may ask while an earlier request waits."""

    daemon_threads = True

    def server_bind(self):
        """Bind without HTTPServer's lookup of the host's name, which waits for DNS a container without network
        lacks."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]


def main(argv):
    """Serve the endpoint, run the agent, report its exit code; 2 on a bad command line."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.stderr.write("usage: relay_bridge.py -- AGENT COMMAND...\n")
        return 2
    command = argv[argv.index("--") + 1:]
    out = os.fdopen(os.dup(1), "wb")
    into = os.fdopen(os.dup(0), "rb")
    # From here on, nothing this process or the agent prints can reach the channel by accident.
    os.dup2(2, 1)
    channel = Channel(out, into)
    server = Server(("127.0.0.1", 0), handler_for(channel))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=channel.read_answers, daemon=True).start()
    url = "http://127.0.0.1:%d/v1" % server.server_address[1]
    env = dict(os.environ, OPENAI_BASE_URL=url, OPENAI_API_BASE=url, OPENAI_API_KEY=PLACEHOLDER_KEY,
               ASYNCODEBENCH_RELAY_URL=url)
    try:
        code = subprocess.call(command, stdin=subprocess.DEVNULL, stdout=2, stderr=2, env=env)
    except OSError as exc:
        sys.stderr.write("could not start the agent %r: %s\n" % (command, exc))
        code = 127
    channel.send({"kind": "exit", "code": code})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
