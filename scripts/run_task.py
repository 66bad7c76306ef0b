r"""Run one evaluation of one task in its pinned container and print the structured result: the debugging tool.

    python scripts/run_task.py asyncodebench:wcwidth --patch my.diff
    python scripts/run_task.py asyncodebench-demo:minicache --base --dataset build/demo-dataset --show-output
    python scripts/run_task.py asyncodebench-demo:minicache --patch data/demo/patches/gold.patch \
        --dataset build/demo-dataset --timeout 60 --no-probes

The result JSON (stdout) is what evaluate.py saves as the prediction's result.json, made by the same code: the
task's base state is evaluated first and the patch held to it (the base-state floor), as evaluate.py does. It adds
the probe checkpoints under `checkpoints` (evaluate.py writes them beside result.json). The prediction is line 0 of
model `run_task`, protocol `single`; only that identity and the timings differ from evaluate.py's result for the
same patch. --show-output adds the tail of the evaluator's output on stderr. Nothing is kept on disk.

Tasks with overlay patches fetch them from the upstream repository (cached; --overlays-url points elsewhere) or
read them from a checkout given with --overlays-dir.

With --no-probes the dependency metrics (ADPR, DRS, DRE, CAIL) are null: not measured.

Exit codes: 0 evaluated (whatever the score); 2 bad arguments (including limits: --memory at least 64m, --pids at
least 32, --cpus at least 0.01); 3 infrastructure error (the Hub unreachable, daemon unreachable, image missing or
with another digest: see scripts/check_images.py; an overlay that cannot be had or does not match; the base state
or the patch could not be evaluated: the JSON, printed too, says why under `infrastructure_error`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION

# The rest of the kit is imported once the arguments are parsed: --help and a bad flag answer at once.
if TYPE_CHECKING:
    from asyncodebench.run.work import Outcome


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
    from asyncodebench.harness.evaluation import new_run_id
    from asyncodebench.harness.overlays import OverlayError, OverlaySource
    from asyncodebench.harness.sandbox import SandboxUnavailableError, remove_run_containers
    from asyncodebench.run.predictions import Prediction
    from asyncodebench.run.work import Job, check_image, evaluate_prediction, measure_baseline

    _, spec = cli.task(args.dataset, args.revision, args.task_id, args.images)
    try:
        overlays = OverlaySource(directory=args.overlays_dir, url=args.overlays_url).load(spec.overlays)
    except OverlayError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    patch = args.patch.read_bytes() if args.patch else b""
    settings = cli.settings(args, run_probes=not args.no_probes)
    client = cli.client_for_image(spec)
    prediction = Prediction(0, spec.task_id, "single", "run_task", None,
                            patch.decode("utf-8", errors="surrogateescape"), (), {}, {})
    label = f"run-task-{new_run_id()}"
    try:
        try:  # what evaluate.py's executors do: the task's base state (the floor), then the prediction held to it
            floor = measure_baseline(client, spec, label, settings, overlays)
            job = Job(spec, prediction, settings, overlays, floor, label)
            outcome = evaluate_prediction(client, job, check_image(client, spec, allow_pull=False))
        finally:
            remove_run_containers(client, label)  # and the run's volume of the image's work tree
    except SandboxUnavailableError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    assert outcome is not None  # None only when a run is stopping, which this one never is
    record = result_record(outcome)
    print(json.dumps(record, indent=2, default=str))
    if args.show_output and outcome.evidence is not None:
        from asyncodebench.untrusted import terminal_text

        print(terminal_text(outcome.evidence.output[-20_000:], newlines=True), file=sys.stderr)  # the code's own
        print(f"(pytest's counts above include the harness's 4 sentinel tests, test_{outcome.evidence.sentinel}.py: "
              "one passes, one fails, one errors, one is skipped; they never count in the result)", file=sys.stderr)
    if outcome.infrastructure_kind is not None:
        error = record["infrastructure_error"]
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, f"{error['kind']}: {error['message']}")
    return cli.EXIT_OK


def result_record(outcome: Outcome) -> dict[str, Any]:
    """The prediction's `result.json` as evaluate.py writes it (the same typed record, `PredictionResult.to_json`),
    with its checkpoint records (the run folder's dependency_probe_checkpoints.jsonl) under `checkpoints`."""
    return {**outcome.result.to_json(), "checkpoints": list(outcome.result.checkpoints)}


if __name__ == "__main__":
    sys.exit(main())
