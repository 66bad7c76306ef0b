"""Build steps that run before evaluation (METRICS decision 13), read from the kit's `data/native_builds.yaml`.

Upstream rebuilds the native code of some tasks (Apache TVM: `cmake --build build --parallel`) before it runs their
evaluator. The published rows do not carry that step, so the kit keeps it beside them, keyed by task id, with where
each entry comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

NATIVE_BUILDS_FILE = Path(__file__).resolve().parents[2] / "data" / "native_builds.yaml"


class NativeBuildError(ValueError):
    """The build table is malformed."""


@dataclass(frozen=True)
class NativeBuild:
    """How one task's native code is rebuilt before a state is evaluated."""

    command: tuple[str, ...]  # run in the work tree, e.g. ("cmake", "--build", "build", "--parallel")
    build_dir: str  # the image's configured build tree: one folder name at the top of the work tree
    timeout_seconds: int  # the default limit of one build (--build-timeout overrides it)
    source: str  # where the step comes from


@lru_cache(maxsize=None)
def native_builds(path: Path = NATIVE_BUILDS_FILE) -> dict[str, NativeBuild]:
    """The build step of every task that has one, by task id.

    Raises:
        NativeBuildError: an entry lacks a field or names a build folder that is not one plain folder name.
    """
    entries = yaml.safe_load(path.read_text()) or {}
    builds = {}
    for task_id, entry in entries.items():
        try:
            build = NativeBuild(tuple(entry["command"]), entry["build_dir"], int(entry["timeout_seconds"]),
                                " ".join(entry["source"].split()))
        except (KeyError, TypeError, ValueError) as exc:
            raise NativeBuildError(f"{path}: the entry of {task_id} needs command, build_dir, timeout_seconds and "
                                   f"source ({exc})") from exc
        if not build.command or "/" in build.build_dir or build.build_dir in ("", ".", "..", ".git"):
            raise NativeBuildError(f"{path}: the entry of {task_id} needs a command and a build_dir that is one "
                                   f"folder name at the top of the work tree, not {build.build_dir!r}")
        builds[task_id] = build
    return builds


def native_build(task_id: str) -> NativeBuild | None:
    """The build step of `task_id`, or None when its native code (if any) is not rebuilt."""
    return native_builds().get(task_id)
