"""Argument checks shared by the command-line scripts: every value is validated when arguments are parsed.

Each checker is an argparse `type=` callable: a bad value makes argparse print one line naming the flag and what
to give instead, and exit with code 2, before anything is loaded or started.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MIN_MEMORY_BYTES = 64 << 20  # below this neither pytest nor the harness's own steps can start
MIN_PIDS = 32  # the harness's shell, timeout, python and pytest's own threads need a few processes
MIN_CPUS = 0.01  # the smallest CPU share Docker accepts
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([bkmg]?)b?", re.IGNORECASE)


def run_id(text: str) -> str:
    """A run id names a folder inside --output-dir: letters, digits, `.`, `_`, `-`, not starting with `.` or `-`."""
    if not RUN_ID_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a usable run id: give 1 to 100 characters among letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (it names a folder inside --output-dir)")
    return text


def memory_size(text: str) -> str:
    """A Docker memory size such as `512m` or `4g` (at least 64m), returned in a canonical form (`4096m` -> `4g`)."""
    match = _MEMORY.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a memory size: give a number with a unit, such as 512m or 4g")
    number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * _UNITS[unit])
    if size < MIN_MEMORY_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too little memory (0 would remove the limit): give at least 64m, such as 512m or 4g")
    for suffix in ("g", "m", "k"):
        if size % _UNITS[suffix] == 0:
            return f"{size // _UNITS[suffix]}{suffix}"
    return str(size)


def cpus(text: str) -> float:
    """A CPU share: at least 0.01 and, on a local daemon, at most this machine's CPU count."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of CPUs: give for example 1 or 0.5") from None
    if not math.isfinite(value) or value < MIN_CPUS:
        raise argparse.ArgumentTypeError(
            f"{text!r} CPUs would remove or break the limit: give a number of at least {MIN_CPUS}, such as 1 or 0.5")
    available = os.cpu_count() or 1
    host = os.environ.get("DOCKER_HOST", "")
    if (not host or host.startswith("unix://")) and value > available:
        raise argparse.ArgumentTypeError(
            f"{text!r} CPUs is more than this machine has ({available}); give at most {available}")
    return value


def _whole_number(text: str, hint: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{hint}") from None


def pids(text: str) -> int:
    """A process limit: a whole number of at least 32 (0 or -1 would mean no limit at all)."""
    value = _whole_number(text, " of processes: give for example 512")
    if value < MIN_PIDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} processes would remove the limit or stop the tests from starting: give at least {MIN_PIDS}, "
            "such as 512")
    return value


def positive_int(text: str) -> int:
    """A whole number above 0 (seconds, workers)."""
    value = _whole_number(text, ": give one above 0")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds: give one above 0, such as 20") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} seconds: give a number of seconds above 0, such as 20")
    return value


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """--timeout, --probe-timeout, --memory, --cpus, --pids: the container limits evaluate.py and run_task.py share."""
    parser.add_argument("--timeout", type=positive_int, default=900, help="evaluator limit in seconds (official: 900)")
    parser.add_argument("--probe-timeout", type=positive_int, default=60, help="per probe selector (official: 60)")
    parser.add_argument("--memory", type=memory_size, default="4g",
                        help="container memory limit, no swap (Docker size such as 512m or 4g; at least 64m)")
    parser.add_argument("--cpus", type=cpus, default=1.0, help="CPUs the container may use (at least 0.01)")
    parser.add_argument("--pids", type=pids, default=512, help=f"container process limit (at least {MIN_PIDS})")


def writable_folder_problem(folder: Path) -> str | None:
    """Why results cannot be written in `folder` (created if missing), or None when they can."""
    if folder.exists() and not folder.is_dir():
        return f"{folder} exists and is not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write in {folder} ({exc.strerror or exc})"
    return None


def load_rows_or_exit_code(dataset: str, revision: str | None) -> Any:
    """The published rows, or the exit code after one line on stderr: 3 when the dataset cannot be reached (an
    infrastructure problem), 2 when the path or id is wrong (a bad argument)."""
    import sys

    from asyncodebench.dataset.rows import DatasetUnavailableError, load_published

    try:
        return load_published(dataset, revision)
    except DatasetUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def task_or_exit_code(dataset: str, revision: str | None, task_id: str, images: Path | None) -> Any:
    """(task row, its `TaskSpec` on the image the map names, if any), or the exit code after one line on stderr:
    2 for an unknown task or a bad image map, 3 when the dataset cannot be reached."""
    import sys

    from asyncodebench.harness.spec import TaskSpec
    from asyncodebench.images import image_map

    published = load_rows_or_exit_code(dataset, revision)
    if isinstance(published, int):
        return published
    rows = {t["task_id"]: t for t in published.rows.tasks}
    if task_id not in rows:
        print(f"error: unknown task {task_id!r}; the dataset has {sorted(rows)}", file=sys.stderr)
        return 2
    spec = TaskSpec.from_rows(rows[task_id], published.rows.dependencies)
    if images:
        try:
            entries = {k: v for k, v in image_map.load(images).items() if k == task_id}
            spec = image_map.apply({task_id: spec}, entries, images)[task_id]
        except image_map.ImageMapError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return rows[task_id], spec


def client_for_image_or_exit_code(spec: Any) -> Any:
    """A Docker client once the task's pinned image is there with its digest, or 3 after one line on stderr (the
    daemon unreachable, the image missing or with another digest: an infrastructure problem)."""
    import sys

    from asyncodebench.harness.sandbox import SandboxUnavailableError, docker_client
    from asyncodebench.images.digests import MATCH, local_status

    try:
        client = docker_client()
        image = local_status(client, spec.task_id, spec.image, spec.pinned_ref)
    except SandboxUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    if image.state != MATCH:
        print(f"error: image {spec.pinned_ref} is {image.state}: {image.detail}", file=sys.stderr)
        return 3
    return client
