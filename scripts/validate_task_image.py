#!/usr/bin/env python3
r"""Validate a task image against the release's recorded counts (base and reference states, probes, flakiness).

    python scripts/validate_task_image.py asyncodebench:cachetools --images build/rebuilt-images.json \
        --repo /path/to/cachetools.git [--repeat 3] [--overlays-dir CHECKOUT] [--out build/validation]

Runs the evaluator and every probe selector on the base state (overlays applied when --overlays-dir or
--overlays-url gives them) and on the reference state: the base commit's parent (or --reference-revision) in the
task's repository (--repo, default its repository_url), diffed against the base and restricted to the task's
writable paths. Each state runs --repeat times, each in fresh containers. Writes <out>/<name>.json and
<out>/<name>.md and prints the Markdown: counts against the recorded initial and completed counts, per dependency
point whether each probe group discriminates (fails at base, passes at reference), and every test and selector whose
outcome changed between runs. Without --images it validates the row's official image.

Exit codes: 0 every run's counts match the recorded ones in both states; 1 a mismatch (or nothing recorded to
compare with); 2 bad arguments; 3 infrastructure (dataset, daemon, image, repository or overlays unavailable).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.harness.evaluation import new_run_id
from asyncodebench.harness.overlays import OverlayError, OverlaySource
from asyncodebench.harness.sandbox import SandboxUnavailableError, remove_run_containers
from asyncodebench.harness.spec import COUNT_KEYS
from asyncodebench.images import validation
from asyncodebench.images.task_build import BuildError
from asyncodebench.images.toolkit import cache_dir


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_id")
    parser.add_argument("--images", type=Path, default=None, metavar="MAP", help="image map naming the image to check")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    parser.add_argument("--repo", default=None, help="URL or local git path of the task's repository "
                                                     "(default: the row's repository_url)")
    parser.add_argument("--reference-revision", default=None,
                        help="the commit holding the complete code (default: the base revision's parent)")
    parser.add_argument("--reference-scope", choices=("writable", "all"), default="writable",
                        help="which files the reference patch restores: the task's writable paths (the default, "
                             "what agents can reach) or every file (tells image problems from tasks whose "
                             "complete code lies partly outside the writable paths)")
    parser.add_argument("--repeat", type=cli.positive_int, default=3, help="runs per state (default 3)")
    parser.add_argument("--out", type=Path, default=Path("build/validation"), help="folder for <name>.json/.md")
    parser.add_argument("--overlays-dir", type=Path, default=None, help="checkout of the upstream repository "
                                                                        "holding the overlay patches")
    parser.add_argument("--overlays-url", default=None, help="base URL to fetch the overlay patches from")
    parser.add_argument("--no-overlays", action="store_true",
                        help="validate the bare base revision (compare with the raw recorded counts)")
    cli.add_limit_arguments(parser)
    return parser.parse_args(argv)


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A validation runs for minutes: on SIGTERM unwind like Ctrl-C, so the `finally` below removes its containers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(cli.EXIT_TERMINATED))
    row, spec = cli.task(args.dataset, args.revision, args.task_id, args.images)
    completed = [{k: s[k] for k in COUNT_KEYS} for s in row["expected_test_counts"]
                 if s["evidence_scope"] == "evaluator_sanity_only"]
    overlays: dict[str, bytes] = {}
    if spec.overlays and not args.no_overlays:
        try:
            overlays = OverlaySource(directory=args.overlays_dir, url=args.overlays_url).load(spec.overlays)
        except OverlayError as exc:
            raise cli.Exit(cli.EXIT_INFRASTRUCTURE,
                           f"{exc}\n(--no-overlays validates the bare base revision instead)") from exc
    if args.no_overlays:
        spec = validation.without_overlays(spec)
    paths = () if args.reference_scope == "all" else tuple(dict.fromkeys(
        [*spec.single_agent_paths, *(p for a in spec.specialists for p in a.writable_paths)]))
    try:
        reference = validation.reference_patch(args.repo or row["repository_url"], cache_dir(), spec.base_revision,
                                               args.reference_revision, paths, overlays)
    except BuildError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    settings = cli.settings(args, run_probes=True)
    run_id = f"validate-{new_run_id()}"
    client = cli.client_for_image(spec)
    try:
        try:
            record = validation.validate(client, spec, reference, completed, run_id, settings, overlays,
                                         args.repeat, progress=lambda m: print(f"{spec.task_id}: {m}",
                                                                               file=sys.stderr, flush=True))
        finally:
            remove_run_containers(client, run_id)
    except SandboxUnavailableError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    record["overlays_listed"] = len(row["overlays"])
    record["reference_scope"] = args.reference_scope
    name = spec.task_id.split(":", 1)[1] + ("" if args.reference_scope == "writable" else ".all-files")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    text = validation.markdown(record)
    (args.out / f"{name}.md").write_text(text)
    print(text)
    return cli.EXIT_OK if record["counts_match"] else cli.EXIT_PROBLEMS_FOUND


if __name__ == "__main__":
    sys.exit(main())
