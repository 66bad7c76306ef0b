"""Write THIRD_PARTY_NOTICES.md: where every piece of upstream material a task points at comes from, and under
which license.

The dataset carries no upstream code, only references to it (repository, revision, overlay hashes, image digests).
Generating the notices from the same task rows as the Parquet files keeps the two from drifting apart: a new task,
a moved base revision or a re-pushed image changes both in one build, and `--check` catches a stale copy.
"""

from __future__ import annotations

from typing import Any

NOTICES_NAME = "THIRD_PARTY_NOTICES.md"
OVERLAY_REPOSITORY = "https://github.com/KaituoZhang/AsynCodeBench"
# Registry host -> how people know it. Other hosts (a local test registry) are named by their host.
REGISTRY_NAMES = {"docker.io": "Docker Hub", "ghcr.io": "GitHub Container Registry (GHCR)"}


def render_notices(tasks: list[dict[str, Any]], upstream_release: str) -> str:
    """The notices for `tasks` (rows of the `tasks` configuration), one section per upstream repository."""
    by_repository: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        by_repository.setdefault(task["repository_url"], []).append(task)
    parts = [_preamble(upstream_release)]
    parts += [_repository_section(url, of_repo) for url, of_repo in by_repository.items()]
    return "\n\n".join(parts) + "\n"


def _preamble(upstream_release: str) -> str:
    return "\n".join([
        "# Third-party notices",
        "",
        "AsynCodeBench's own material (task descriptions, contract summaries, metadata, code) is licensed under",
        "Apache-2.0; see `LICENSE`. The tasks are built on third-party repositories that stay under their own",
        "licenses. The dataset does not redistribute their code: each row names the repository, the exact base",
        "revision, the license that applies at that revision, the overlay patches applied on top of it and the",
        "container image the evaluator runs in. Whoever fetches that material receives it from its publishers and",
        "under their terms.",
        "",
        f"Overlays are test and bootstrap patches published in {OVERLAY_REPOSITORY} (upstream release",
        f"{upstream_release}); they are identified here by their path in that repository and their SHA-256.",
        "",
        "This file is generated from `data/tasks/*.yaml` by `python AsynCodeBench.py`; do not edit it by hand.",
    ])


def _repository_section(url: str, tasks: list[dict[str, Any]]) -> str:
    name = url.removeprefix("https://github.com/")
    lines = [f"## {name}", "", f"Repository: <{url}>"]
    for task in tasks:
        lines += ["", *_task_entry(url, task)]
    return "\n".join(lines)


def _task_entry(url: str, task: dict[str, Any]) -> list[str]:
    revision = task["base_revision"]
    license_link = f"{url}/blob/{revision}/{task['license_file']}" if url.startswith("https://github.com/") else url
    lines = [
        f"### {task['task_id']}",
        "",
        f"- Base revision: `{revision}`",
        f"- License: {task['license']} (SPDX), text in [`{task['license_file']}`]({license_link}) at that revision",
    ]
    if task.get("pull_request_url"):
        lines.append(f"- Pull request the task is derived from: <{task['pull_request_url']}>")
    if task["overlays"]:
        lines.append(f"- Overlays from {OVERLAY_REPOSITORY.removeprefix('https://github.com/')}:")
        lines += [f"  - `{o['path']}` (sha256 `{o['sha256']}`)" for o in task["overlays"]]
    else:
        lines.append("- Overlays: none")
    lines += [
        f"- Container image: `{task['container_image']}`, digest `{task['container_digest']}`",
        f"  ({image_source(task['container_image'])})",
    ]
    return lines


def image_source(image: str) -> str:
    """Who publishes `image` and where, read from its reference (`host/owner/name:tag`)."""
    host, owner, *_ = image.split("/") + ["", ""]
    registry = REGISTRY_NAMES.get(host, f"registry {host}")
    return f"published on {registry} by {owner}" if owner else f"published on {registry}"
