"""Conventions for files exchanged with a task container: where they live and how commands write them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from asyncodebench.sandbox import Sandbox

IO_DIR = "/asyncodebench"
SCRIPTS_DIR = Path(__file__).resolve().parent / "incontainer"  # copied into containers, never imported here
OUTPUT_CAP_BYTES = 1_000_000  # the last megabyte of a command's output is kept
REPORT_CAP_BYTES = 200_000_000
KILL_GRACE_SECONDS = 10


def timed_shell(workdir: str, command: tuple[str, ...], seconds: int, name: str) -> str:
    """A shell line running `command` in `workdir` under `timeout`; output, tail and exit code land in IO_DIR.

    The repository's `src/` and root go first on PYTHONPATH, as the official evaluator and probes do.
    """
    out = f"{IO_DIR}/{name}.out"
    return (
        f'cd {shlex.quote(workdir)} && PYTHONPATH={shlex.quote(workdir)}/src:{shlex.quote(workdir)}:"${{PYTHONPATH:-}}" '
        f"timeout -k {KILL_GRACE_SECONDS} {seconds} {shlex.join(command)} > {out} 2>&1; "
        f"echo $? > {IO_DIR}/{name}.rc; tail -c {OUTPUT_CAP_BYTES} {out} > {IO_DIR}/{name}.tail; rm -f {out}"
    )


def stopped_by_timeout(exit_code: int | None, seconds: float, limit: int) -> bool:
    """Whether `timeout` ended the command: 124, or 137 when it had to escalate to SIGKILL after the full limit.

    A 137 before the limit is another SIGKILL (the kernel's OOM killer), not a timeout.
    """
    return exit_code == 124 or (exit_code == 137 and seconds >= limit)


def read_exit_code(box: Sandbox, name: str) -> int | None:
    raw = box.read_file(f"{IO_DIR}/{name}.rc", 100)
    try:
        return int(raw.decode().strip()) if raw else None
    except ValueError:
        return None


def read_tail(box: Sandbox, name: str) -> str:
    raw = box.read_file(f"{IO_DIR}/{name}.tail", OUTPUT_CAP_BYTES)
    return raw.decode("utf-8", errors="replace") if raw else ""


def read_report(box: Sandbox, path: str) -> dict[str, Any] | None:
    """A pytest-json-report: None when the file is absent, {} when it cannot be read as a JSON object."""
    raw = box.read_file(path, REPORT_CAP_BYTES)
    if raw is None:
        return None
    try:
        report = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return report if isinstance(report, dict) else {}


def script_bytes(name: str) -> bytes:
    """An in-container script's source, e.g. `prepare.py`."""
    return (SCRIPTS_DIR / name).read_bytes()
