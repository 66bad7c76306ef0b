"""The sessions of a run folder: each start of `evaluate.py` on it, in `sessions.json`.

A run interrupted and resumed is several sessions; its report must cover them all, not only the last one. Each
session is recorded when it starts (so a `kill -9` still leaves its start) and completed when it ends, finished or
interrupted. Only the holder of the run lock writes the file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from asyncodebench.files import write_atomic

SESSIONS = "sessions.json"


@dataclass(frozen=True)
class Session:
    """One start of evaluate.py on the run folder, and how it ended."""

    started_at: str
    mode: str  # "evaluate" or "rescore"
    finished_at: str | None = None  # None: still running, or ended without a word (kill -9, power loss)
    ended: str | None = None  # "finished" or "interrupted"; None as for finished_at
    evaluated: int | None = None  # predictions evaluated in this session


def read(run_dir: Path) -> list[Session]:
    """The run folder's sessions, oldest first; none for a folder without the file (made before 0.4.2)."""
    try:
        records = json.loads((run_dir / SESSIONS).read_text(encoding="utf-8"))
        return [Session(**record) for record in records]
    except FileNotFoundError:
        return []
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{run_dir / SESSIONS} is damaged ({exc}); delete it to start the record afresh "
                         "(the results are not affected)") from exc


def _write(run_dir: Path, sessions: list[Session]) -> None:
    write_atomic(run_dir / SESSIONS, (json.dumps([asdict(s) for s in sessions], indent=1) + "\n").encode())


def begin(run_dir: Path, started_at: str, mode: str) -> None:
    """Record a session starting. A damaged record must not stop the run (it is only its history): it is kept
    aside as `sessions.json.damaged`, said on stderr, and the record starts afresh."""
    try:
        earlier = read(run_dir)
    except ValueError as exc:
        (run_dir / SESSIONS).replace(run_dir / f"{SESSIONS}.damaged")
        print(f"warning: {exc}; kept as {SESSIONS}.damaged, and the report lists the sessions from this one on",
              file=sys.stderr)
        earlier = []
    _write(run_dir, [*earlier, Session(started_at, mode)])


def end(run_dir: Path, finished_at: str, ended: str, evaluated: int) -> list[Session]:
    """Complete the last session (this one); return every session."""
    sessions = read(run_dir)
    if sessions:
        last = sessions[-1]
        sessions[-1] = Session(last.started_at, last.mode, finished_at, ended, evaluated)
        _write(run_dir, sessions)
    return sessions


def forget(run_dir: Path) -> None:
    """Drop the record (`--force`: the earlier sessions' results are dropped too)."""
    (run_dir / SESSIONS).unlink(missing_ok=True)
