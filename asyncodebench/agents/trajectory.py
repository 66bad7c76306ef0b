"""An agent's trajectory as JSONL: one line per message as it happens (so a killed run keeps what it did), then a
closing `summary` line. Lines carry the message's role and text, and what the runner knows of it: the commands a
model response called and its token counts, a command's output, exit code and seconds, and the time.

The line shapes (every line has `index`, `type` and `time`):

- `{"type": "message", "role": "system" | "user", "content"}`: the prompts;
- `{"type": "response", "content", "commands": [...], "prompt_tokens", "completion_tokens"}`: a model response;
- `{"type": "observation", "command", "output", "exit_code", "seconds", "timed_out"}`: what a command did;
- `{"type": "format_error", "content", "reply"}`: the agent's answer to a response it could not use, and that
  response as the model sent it (`reply`: text, tool calls' names and arguments, finish reason; bounded);
- `{"type": "retry", "attempt", "failure", "status", "message", "wait_seconds"}`: a failed model call tried again
  (`model_client.ModelClient`); `{"type": "timeout", "attempt", "timeout_seconds", ...}`: an attempt not answered
  in time;
- `{"type": "inbox", "content"}`: a manager's message as the agent was shown it (manager protocols);
- `{"type": "error", ...}`: a model request the relay refused or that failed (in-container agents);
- `{"type": "exit", "exit_status", "content"}`: how the agent's loop ended;
- `{"type": "summary", "termination_reason", "usage": {...}, ...}`: the last line, written by the adapter.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, TextIO

from asyncodebench.agents.adapter import now

OUTPUT_CHARS = 100_000  # of each command's output kept in the trajectory (the tail)


class TrajectoryWriter:
    """Appends trajectory lines to a file, flushed one by one."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.handle: TextIO = path.open("w", encoding="utf-8")
        self.count = 0
        self.lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        """One line of type `kind`."""
        with self.lock:
            line = {"index": self.count, "type": kind, "time": now(), **fields}
            self.handle.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
            self.handle.flush()
            self.count += 1

    def close(self) -> None:
        """Close the file (further writes fail)."""
        self.handle.close()


def read_trajectory(path: Path) -> list[dict[str, Any]]:
    """The lines of a trajectory file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
