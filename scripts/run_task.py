"""Run one evaluation of one task in its pinned container and print the structured result: the debugging tool.

    python scripts/run_task.py asyncodebench:wcwidth --patch my.diff
    python scripts/run_task.py asyncodebench-demo:minicache --base --dataset build/demo-dataset --show-output
    python scripts/run_task.py asyncodebench-demo:minicache --patch data/demo/patches/gold.patch \\
        --dataset build/demo-dataset --timeout 60 --no-probes

The result JSON (stdout) is what evaluate.py saves as result.json, plus the probe checkpoints; --show-output adds
the tail of the evaluator's output on stderr. Nothing is written to disk.

Tasks with overlay patches fetch them from the upstream repository (cached; --overlays-url points elsewhere) or
read them from a checkout given with --overlays-dir.

With --no-probes the dependency metrics (ADPR, DRS, DRE, CAIL) are null: not measured.

Exit codes: 0 evaluated (whatever the score); 2 bad arguments (including limits: --memory at least 64m, --pids at
least 32, --cpus at least 0.01); 3 infrastructure error (the Hub unreachable, daemon unreachable, image missing or
with another digest: see scripts/check_images.py; an overlay that cannot be had or does not match).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.harness.evaluation import evaluate_patch, new_run_id
from asyncodebench.harness.overlays import OverlayError, OverlaySource
from asyncodebench.harness.sandbox import SandboxUnavailableError, remove_run_containers
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score
from asyncodebench.run.runner import without_unmeasured


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_id")
    state = parser.add_mutually_exclusive_group(required=True)
    state.add_argument("--patch", type=Path, help="unified diff against the task's base revision")
    state.add_argument("--base", action="store_true", help="evaluate the base state (no patch)")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    cli.add_limit_arguments(parser)
    parser.add_argument("--no-probes", action="store_true", help="skip the dependency probes (metrics then null)")
    parser.add_argument("--show-output", action="store_true", help="print the evaluator output tail on stderr")
    parser.add_argument("--overlays-dir", type=Path, default=None,
                        help="checkout of the upstream AsynCodeBench repository: overlay patches are read from it "
                             "offline instead of fetched")
    parser.add_argument("--images", type=Path, default=None, metavar="MAP",
                        help="an image map: run the task on the image it names (e.g. a rebuilt one)")
    parser.add_argument("--overlays-url", default=None,
                        help="base URL the overlay patches are fetched from (default: $ASYNCODEBENCH_OVERLAYS_URL, "
                             "else the upstream repository at the pinned commit)")
    args = parser.parse_args(argv)
    if args.patch is not None and not args.patch.is_file():
        parser.error(f"{args.patch} is not a file")
    return args


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _, spec = cli.task(args.dataset, args.revision, args.task_id, args.images)
    try:
        overlays = OverlaySource(directory=args.overlays_dir, url=args.overlays_url).load(spec.overlays)
    except OverlayError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    patch = args.patch.read_bytes() if args.patch else b""
    settings = cli.settings(args, run_probes=not args.no_probes)
    client = cli.client_for_image(spec)
    run_id = f"run-task-{new_run_id()}"
    try:
        try:
            evidence = evaluate_patch(client, spec, patch, run_id, settings, overlays)
        finally:
            remove_run_containers(client, run_id)  # and the run's volume of the image's work tree
    except SandboxUnavailableError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    prediction = Prediction(0, spec.task_id, "single", "run_task", None,
                            patch.decode("utf-8", errors="surrogateescape"), (), {}, {})
    print(json.dumps(without_unmeasured(score(spec, prediction, evidence), settings), indent=2, default=str))
    if args.show_output:
        print(evidence.output[-20_000:], file=sys.stderr)
        print(f"(pytest's counts above include the harness's 4 sentinel tests, test_{evidence.sentinel}.py: one "
              "passes, one fails, one errors, one is skipped; they never count in the result)", file=sys.stderr)
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
