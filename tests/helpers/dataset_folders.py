"""Published dataset folders for the tests: written from task sources or as variants of the demo row, and the
records the dataset fixtures hand out (the demo pinned to the image built here, the demo image rebuilt)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from helpers.checkout import DEMO_DIR, PROTOCOLS_FILE


class DemoDataset(NamedTuple):
    """The demo task's published folder, pinned to the image built and pushed on this machine."""

    path: Path
    pinned_ref: str
    digest: str


class RebuiltDemo(NamedTuple):
    """The demo task's image rebuilt from its recipe by scripts/build_task_image.py, and what the build left."""

    map_path: Path  # the image map the build wrote
    pinned_ref: str  # what the build printed
    entry: dict[str, Any]  # the map's entry for the demo task
    repo: Path  # the git repository built from: the base commit and, after it, the complete code
    reference: str  # the commit holding the complete code (the gold patch applied)
    stderr: str


def write_task_dataset(out_dir: Path, task_files: list[Path], digest: str | None = None) -> Path:
    """A published dataset folder made of the given task sources (the demo task or variants of it)."""
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.dataset.sources import rows_from_task_files
    from asyncodebench.dataset.validation import validate_rows

    rows = rows_from_task_files(task_files, PROTOCOLS_FILE, digest_override=digest)
    validate_rows(rows)
    write_rows(rows, out_dir)
    return out_dir


def pinned(image: str, digest: str) -> str:
    """The row's `container_pinned_ref` for an `image:tag` and a digest (as the builder derives it)."""
    return f"{image.rsplit(':', 1)[0]}@{digest}"


def write_variant_dataset(out_dir: Path, digest: str, variants: list[dict[str, Any]]) -> Path:
    """A dataset folder whose task rows are the demo row with fields replaced, one row per variant.

    A variant may change `task_id`, `container_image` and `container_digest` (the pinned ref follows). Rows are
    written as given, without validation, the way a stale or tampered published folder would reach a user.
    """
    from dataclasses import replace

    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows

    rows = build_task_rows(DEMO_DIR / "task.yaml", PROTOCOLS_FILE, digest=digest)
    tasks = []
    for variant in variants:
        row = {**rows.tasks[0], **variant}
        row["container_pinned_ref"] = pinned(row["container_image"], row["container_digest"])
        tasks.append(row)
    write_rows(replace(rows, tasks=tasks), out_dir)
    return out_dir
