"""Check that every task's pinned container image is the one on this machine (or in its registry), by digest.

    python scripts/check_images.py                                  # Hub dataset at v0.4.2, local Docker images
    python scripts/check_images.py --dataset ./published --pull     # pull what is missing, by digest
    python scripts/check_images.py --registry --json                # ask the registries, pull nothing
    python scripts/check_images.py --tasks asyncodebench:wcwidth

States: `match` (the pinned digest is among the image's RepoDigests), `mismatch` (the image is there with another
digest: it will be refused, never run), `missing` (not on this machine, or the registry has no such tag), and with
--registry `unreachable` (the registry did not answer). The image id is never compared.

Exit codes:
  0  every image matches
  1  some image is mismatched or missing (run with --pull, or fix the registry)
  2  bad arguments (unknown task, no such dataset, a --timeout that is not above 0)
  3  the Docker daemon, a registry or the Hub (for the default dataset) is unreachable
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION, DatasetUnavailableError, load_published
from asyncodebench.images import image_map
from asyncodebench.images.digests import MATCH, UNREACHABLE, ImageStatus, local_status, pull, registry_status


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    parser.add_argument("--tasks", nargs="*", default=[], help="only these task ids")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--pull", action="store_true", help="pull images that do not match, by digest, then recheck")
    where.add_argument("--registry", action="store_true", help="ask each registry for its tag's digest; pull nothing")
    parser.add_argument("--timeout", type=cli.positive_seconds, default=20,
                        help="seconds to wait for a registry (with --registry; above 0)")
    parser.add_argument("--images", type=Path, default=None, metavar="MAP",
                        help="an image map: check the images it names for its tasks instead of the official ones")
    parser.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")
    return parser.parse_args(argv)


def check(tasks: list[dict[str, Any]], mode: str, timeout: float) -> list[ImageStatus]:
    """One status per task row. `mode` is local, pull or registry.

    Raises:
        SandboxUnavailableError: the Docker daemon is not reachable (local and pull modes).
    """
    if mode == "registry":
        return [registry_status(t["task_id"], t["container_image"], t["container_pinned_ref"], timeout) for t in tasks]
    from asyncodebench.harness.sandbox import docker_client

    client = docker_client()
    statuses = []
    for task in tasks:
        args = (client, task["task_id"], task["container_image"], task["container_pinned_ref"])
        try:
            status = local_status(*args)
            if status.state != MATCH and mode == "pull":
                status = pull(*args)
        except Exception as exc:  # the daemon went away mid-check: the SDK raises several unrelated types
            status = ImageStatus(task["task_id"], task["container_pinned_ref"], UNREACHABLE, (),
                                 f"the Docker daemon failed: {exc}")
        statuses.append(status)
    return statuses


def exit_code(statuses: list[ImageStatus]) -> int:
    if any(s.state == UNREACHABLE for s in statuses):
        return cli.EXIT_INFRASTRUCTURE
    return cli.EXIT_OK if all(s.state == MATCH for s in statuses) else cli.EXIT_PROBLEMS_FOUND


def table(statuses: list[ImageStatus], mode: str) -> str:
    lines = [f"Images checked {'in their registries' if mode == 'registry' else 'on this machine'}:", "",
             "| task | state | pinned image | found digests | detail |", "|---|---|---|---|---|"]
    for s in statuses:
        found = ", ".join(d[:19] for d in s.found_digests if d != s.pinned_ref.split("@", 1)[-1])
        lines.append(f"| {s.task_id} | {s.state} | {s.pinned_ref} | {found} | {s.detail} |")
    counts = {state: sum(s.state == state for s in statuses) for state in dict.fromkeys(s.state for s in statuses)}
    lines += ["", ", ".join(f"{n} {state}" for state, n in counts.items()) or "no tasks"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mode = "registry" if args.registry else "pull" if args.pull else "local"
    try:
        published = load_published(args.dataset, args.revision)
    except DatasetUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"mode": mode, "error": str(exc), "images": [], "exit_code": cli.EXIT_INFRASTRUCTURE}))
        return cli.EXIT_INFRASTRUCTURE
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return cli.EXIT_BAD_ARGUMENTS
    tasks = published.rows.tasks
    unknown = sorted(set(args.tasks) - {t["task_id"] for t in tasks})
    if unknown:
        print(f"error: --tasks names unknown task(s) {unknown}; the dataset has {sorted(t['task_id'] for t in tasks)}",
              file=sys.stderr)
        return cli.EXIT_BAD_ARGUMENTS
    tasks = [t for t in tasks if not args.tasks or t["task_id"] in args.tasks]
    if args.images:
        try:
            tasks = image_map.apply_to_rows(tasks, image_map.load(args.images), args.images)
        except image_map.ImageMapError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return cli.EXIT_BAD_ARGUMENTS
    from asyncodebench.harness.sandbox import SandboxUnavailableError

    try:
        statuses = check(tasks, mode, args.timeout)
    except SandboxUnavailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"mode": mode, "error": str(exc), "images": [], "exit_code": cli.EXIT_INFRASTRUCTURE}))
        return cli.EXIT_INFRASTRUCTURE
    code = exit_code(statuses)
    if args.json:
        print(json.dumps({"mode": mode, "dataset": published.dataset, "revision": published.revision,
                          "images": [s.as_dict() for s in statuses], "exit_code": code}, indent=2))
    else:
        print(table(statuses, mode))
    return code


if __name__ == "__main__":
    sys.exit(main())
