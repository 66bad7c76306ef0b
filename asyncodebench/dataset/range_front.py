"""An HTTP front for the olah Hub mirror that honours `Range` requests, as the real Hub does (`hub_mirror.serve`
puts it before olah, so every user of the mirror gets it).

olah answers a ranged GET with the whole file and status 200. Streaming readers (`HfFileSystem` under
`load_dataset(..., streaming=True)`) ask for byte ranges of the Parquet files and take what comes back as that range,
so through olah alone a Parquet footer is read from the wrong bytes. This front forwards every request to the mirror
unchanged, except that a ranged GET is answered with `206 Partial Content` and exactly the bytes asked for; each
such answer is recorded, so a test can prove the ranges were really served. Every other request and answer passes
through unchanged (redirects rewritten to the front).
"""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Hop-by-hop or length headers that the front sets itself.
DROPPED_REQUEST_HEADERS = {"host", "range", "accept-encoding", "connection", "keep-alive", "content-length"}
DROPPED_RESPONSE_HEADERS = {"transfer-encoding", "connection", "keep-alive", "content-length"}
BYTE_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class ServedRange:
    """One ranged GET answered with 206: the path, the first and last byte served and the file size."""

    path: str
    first: int
    last: int
    size: int


@dataclass
class RangeProxy:
    """A running front: point `HF_ENDPOINT` at `endpoint`; `served` lists the ranged answers so far."""

    endpoint: str
    upstream: str
    served: list[ServedRange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, served: ServedRange) -> None:
        """Keep one ranged answer (handler threads answer at once)."""
        with self.lock:
            self.served.append(served)


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """First and last byte of a single `bytes=` range over a file of `size` bytes; None if not satisfiable."""
    match = BYTE_RANGE.match(header.strip())
    if not match or match.groups() == ("", ""):
        return None
    start, end = match.groups()
    if start == "":  # the last N bytes
        first, last = max(size - int(end), 0), size - 1
    else:
        first, last = int(start), min(int(end), size - 1) if end else size - 1
    return (first, last) if first <= last < size else None


def _handler(proxy: RangeProxy) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass  # keep pytest's output clean; `proxy.served` is the record that matters

        def do_GET(self) -> None:
            self._forward()

        def do_HEAD(self) -> None:
            self._forward()

        def do_POST(self) -> None:
            self._forward()

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED_REQUEST_HEADERS}
            connection = http.client.HTTPConnection(upstream.hostname or "127.0.0.1", upstream.port, timeout=60)
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                content = response.read()
                status, answer_headers = response.status, response.getheaders()
            finally:
                connection.close()
            wanted = self.headers.get("Range")
            if self.command == "GET" and wanted and status == 200:
                self._answer_range(wanted, content, answer_headers)
                return
            length_header = dict((k.lower(), v) for k, v in answer_headers).get("content-length")
            self._send(status, answer_headers, content,
                       length=int(length_header) if self.command == "HEAD" and length_header else len(content))

        def _answer_range(self, wanted: str, content: bytes, answer_headers: list[tuple[str, str]]) -> None:
            span = parse_range(wanted, len(content))
            if span is None:
                self._send(416, [("Content-Range", f"bytes */{len(content)}")], b"")
                return
            first, last = span
            proxy.record(ServedRange(self.path.split("?", 1)[0], first, last, len(content)))
            extra = [("Content-Range", f"bytes {first}-{last}/{len(content)}"), ("Accept-Ranges", "bytes")]
            self._send(206, answer_headers + extra, content[first:last + 1])

        def _send(self, status: int, headers: list[tuple[str, str]], content: bytes, length: int | None = None) -> None:
            self.send_response(status)
            for name, value in headers:
                if name.lower() in DROPPED_RESPONSE_HEADERS:
                    continue
                if name.lower() == "location":
                    value = value.replace(proxy.upstream, proxy.endpoint)
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content) if length is None else length))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(content)

    return Handler


@contextmanager
def serve_ranges(upstream: str) -> Iterator[RangeProxy]:
    """Run the front on a free port of 127.0.0.1 before the mirror at `upstream`; stop it on exit."""
    proxy = RangeProxy(endpoint="", upstream=upstream.rstrip("/"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="range-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
