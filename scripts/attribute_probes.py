#!/usr/bin/env python3
r"""Trace every dependency point's probe tests at the reference state, crediting the files they run to agents.

    python scripts/attribute_probes.py --all --images build/rebuilt-images.json \
        [--repo-pattern '/srv/mirrors/{name}.git'] [--overlays-dir CHECKOUT] [--record]

For each task (positional task ids, or --all: every task with an image in the map), each point's upstream,
downstream and integrated probes run at the reference state (the base's parent restricted to the writable paths,
from the overlaid base) in fresh containers of the task's image under a line tracer, and the executed lines of the
specialists' writable files are credited to their owners. Prints the table (docs/probe_attribution.md's) and writes
<out>/attribution.json; with --record, data/probe_attribution.json takes the traced points. A point whose upstream
probes execute none of the producer's files, or mostly another agent's, is flagged (exit 1).

Exit codes: 0 every traced point measures its producer; 1 a point is flagged; 2 bad arguments; 3 infrastructure.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.harness.evaluation import Workbench, new_run_id
from asyncodebench.harness.sandbox import SandboxUnavailableError, remove_run_containers, remove_run_volumes
from asyncodebench.images import attribution, image_map


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_ids", nargs="*", help="tasks to trace (or --all)")
    parser.add_argument("--all", action="store_true", help="every task the image map names")
    parser.add_argument("--images", type=Path, required=True, metavar="MAP", help="image map naming the images")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    cli.add_reference_arguments(parser)
    parser.add_argument("--record", nargs="?", const=attribution.RECORD_FILE, default=None, type=Path,
                        metavar="FILE", help="update the record file (default data/probe_attribution.json)")
    parser.add_argument("--out", type=Path, default=Path("build/attribution"), help="folder for attribution.json")
    cli.add_limit_arguments(parser)
    args = parser.parse_args(argv)
    if args.all == bool(args.task_ids):
        parser.error("give task ids or --all (not both)")
    return args


def trace_task(task_id: str, args: argparse.Namespace) -> dict[str, dict]:
    row, spec = cli.task(args.dataset, args.revision, task_id, args.images)
    dependencies = [d for d in cli.load_rows(args.dataset, args.revision).rows.dependencies if d["task_id"] == task_id]
    overlays = cli.task_overlays(args, spec)
    patch = cli.reference_patch(args, row, spec, overlays)
    run_id = f"attribution-{new_run_id()}"
    client = cli.client_for_image(spec)
    try:
        bench = Workbench.open(client, spec, run_id, cli.settings(args, run_probes=False), overlays)
        return attribution.attribute_task(bench, row, dependencies, patch,
                                          progress=lambda m: print(f"{task_id}: {m}", file=sys.stderr, flush=True))
    except SandboxUnavailableError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    finally:
        remove_run_containers(client, run_id)
        remove_run_volumes(client, run_id)


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(cli.EXIT_TERMINATED))
    task_ids = args.task_ids or sorted(image_map.load(args.images))
    points: dict[str, dict] = {}
    for task_id in task_ids:
        points.update(trace_task(task_id, args))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "attribution.json").write_text(json.dumps(points, indent=2) + "\n")
    if args.record:
        attribution.save_record_file({**attribution.load_record_file(args.record), **points}, args.record)
    print(attribution.markdown_table(points))
    flagged = attribution.flagged(points)
    for dep_id, why in flagged.items():
        print(f"flagged: {dep_id}: {why.replace('_', ' ')}")
    return cli.EXIT_PROBLEMS_FOUND if flagged else cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
