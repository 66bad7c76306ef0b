"""Image maps: run tasks on images rebuilt from source instead of the rows' official ones, and say so.

An image map is a JSON file (`schemas/image_map.schema.json`):

    {"schema_version": "1", "images": {"asyncodebench:<name>": {
        "pinned_ref": "registry/repo@sha256:...", "provenance": "rebuilt", "recipe_sha256": "...",
        "base_image_digest": "sha256:...", "built_at": "2026-11-30T12:00:00+00:00"}}}

`apply` gives the task specs with the mapped image; the rows themselves never change. Every result records the
image it ran on and its provenance (`official` for the rows' own image), and the report says which ran rebuilt.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from asyncodebench.harness.spec import TaskSpec

OFFICIAL, REBUILT = "official", "rebuilt"


class ImageMapError(ValueError):
    """The image map cannot be used; the message names the file, the entry and the fix."""


def load(path: Path) -> dict[str, dict[str, Any]]:
    """The map's entries by task id, checked against its schema.

    Raises:
        ImageMapError: the file is missing, not JSON, or breaks the schema.
    """
    from asyncodebench.dataset.validation import validator

    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ImageMapError(f"cannot read the image map {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ImageMapError(f"the image map {path} is not JSON ({exc}); see schemas/image_map.schema.json") from exc
    problems = sorted(validator("image_map").iter_errors(data), key=lambda e: list(e.absolute_path))
    if problems:
        where = "/".join(str(p) for p in problems[0].absolute_path) or "(top level)"
        raise ImageMapError(f"the image map {path} breaks schemas/image_map.schema.json at {where}: "
                            f"{problems[0].message}")
    return data["images"]


def apply(specs: dict[str, TaskSpec], entries: dict[str, dict[str, Any]], path: Path) -> dict[str, TaskSpec]:
    """The specs with each mapped task's image replaced by its rebuilt one.

    Raises:
        ImageMapError: the map names a task the dataset does not have.
    """
    unknown = sorted(set(entries) - set(specs))
    if unknown:
        raise ImageMapError(f"the image map {path} names task(s) {unknown} that the dataset does not have; "
                            f"its tasks are {sorted(specs)}")
    mapped = dict(specs)
    for task_id, entry in entries.items():
        ref = entry["pinned_ref"]
        mapped[task_id] = dataclasses.replace(specs[task_id], pinned_ref=ref, image=ref,
                                              image_provenance=entry["provenance"])
    return mapped


def apply_to_rows(tasks: list[dict[str, Any]], entries: dict[str, dict[str, Any]],
                  path: Path) -> list[dict[str, Any]]:
    """Task rows (copies) whose image fields name the mapped image, for the image checks.

    Raises:
        ImageMapError: the map names a task the dataset does not have.
    """
    unknown = sorted(set(entries) - {t["task_id"] for t in tasks})
    if unknown:
        raise ImageMapError(f"the image map {path} names task(s) {unknown} that the dataset does not have")
    return [{**t, "container_image": entries[t["task_id"]]["pinned_ref"],
             "container_pinned_ref": entries[t["task_id"]]["pinned_ref"]} if t["task_id"] in entries else t
            for t in tasks]


def describe(specs: dict[str, TaskSpec], entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task, the image it runs on and where that image comes from (for the run's metadata)."""
    return {task_id: {"pinned_ref": spec.pinned_ref, "provenance": spec.image_provenance,
                      **({k: v for k, v in entries[task_id].items() if k != "pinned_ref"}
                         if task_id in entries else {})}
            for task_id, spec in sorted(specs.items())}
