"""Conventions for files exchanged with a task container: where they live and how commands write them."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncodebench.sandbox import Sandbox

IO_DIR = "/asyncodebench"
SCRIPTS_DIR = Path(__file__).resolve().parent / "incontainer"  # copied into containers, never imported here
OUTPUT_CAP_BYTES = 1_000_000  # the last megabyte of a command's output is kept
REPORT_CAP_BYTES = 200_000_000
KILL_GRACE_SECONDS = 10


@dataclass(frozen=True)
class CommandOutput:
    """What a timed command left in its folder: exit code, the tail of its output, its JSON report if any."""

    exit_code: int | None
    tail: str
    report: dict[str, Any] | None  # None when absent, {} when not a JSON object


def command_dir(name: str) -> str:
    return f"{IO_DIR}/{name}"


def timed_shell(workdir: str, command: tuple[str, ...], seconds: int, name: str) -> str:
    """A shell line running `command` in `workdir` under `timeout`, its traces in a fresh `command_dir(name)`.

    The folder gets `rc` (exit code), `tail` (the last MB of output) and whatever report the command writes there.
    The repository's `src/` and root go first on PYTHONPATH, as the official evaluator and probes do.
    """
    folder, quoted = command_dir(name), shlex.quote(workdir)
    return (
        f"rm -rf {folder} && mkdir -p {folder} && cd {quoted} && "
        f'PYTHONPATH={quoted}/src:{quoted}:"${{PYTHONPATH:-}}" '
        f"timeout -k {KILL_GRACE_SECONDS} {seconds} {shlex.join(command)} > {folder}/out 2>&1; "
        f"echo $? > {folder}/rc; tail -c {OUTPUT_CAP_BYTES} {folder}/out > {folder}/tail; rm -f {folder}/out"
    )


def stopped_by_timeout(exit_code: int | None, seconds: float, limit: int) -> bool:
    """Whether `timeout` ended the command: 124, or 137 when it had to escalate to SIGKILL after the full limit.

    A 137 before the limit is another SIGKILL (the kernel's OOM killer), not a timeout.
    """
    return exit_code == 124 or (exit_code == 137 and seconds >= limit)


def read_output(box: Sandbox, name: str) -> CommandOutput:
    """Everything a timed command left, in one read; its report is `report.json` in its folder."""
    files = box.read_files(command_dir(name), REPORT_CAP_BYTES)
    try:
        exit_code: int | None = int(files["rc"].decode().strip())
    except (KeyError, ValueError):
        exit_code = None
    tail = files.get("tail", b"")[-OUTPUT_CAP_BYTES:].decode("utf-8", errors="replace")
    return CommandOutput(exit_code, tail, _report(files.get("report.json")))


def _report(raw: bytes | None) -> dict[str, Any] | None:
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
