"""Score predictions against AsynCodeBench in the tasks' pinned containers.

    python scripts/evaluate.py preds.jsonl                       # Hub dataset at v0.4.2
    python scripts/evaluate.py preds.jsonl --dataset ./published --run-id try1 --max-workers 2
    python scripts/evaluate.py preds.jsonl --run-id try1 --rescore   # regrade saved artifacts, no containers

Every line is checked against schemas/prediction.schema.json; bad lines are reported with their numbers and
skipped, the others evaluated. Rerunning a run id resumes it. Outputs go to <output-dir>/<run-id>/:
report.json, report.md, summary.csv, predictions.csv, dependency_resolution.png, one folder per prediction.

Exit codes: 0 every valid line evaluated; 1 some lines were invalid; 3 infrastructure errors (rerun the same
run id once fixed); 2 bad arguments; 130 interrupted (Ctrl-C; rerun the same run id to resume).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from asyncodebench.evaluation import Settings, new_run_id
from asyncodebench.plots import plot_resolution
from asyncodebench.report import build_report, csv_text, markdown
from asyncodebench.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.runner import RunConfig, prepare_run, run, run_metadata
from asyncodebench.sandbox import Limits
from asyncodebench import store

PROTOCOLS = ["single", "serial_specialists", "async_private", "caid_manager", "async_manager"]


def parse_args(argv: list[str] | None) -> RunConfig:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("predictions", type=Path, help="JSONL (or a JSON list) of predictions")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    parser.add_argument("--run-id", default=None, help="names the run folder; reuse it to resume")
    parser.add_argument("--output-dir", type=Path, default=Path("runs"))
    parser.add_argument("--max-workers", type=int, default=1, help="predictions evaluated at once")
    parser.add_argument("--timeout", type=int, default=900, help="evaluator limit in seconds (official: 900)")
    parser.add_argument("--probe-timeout", type=int, default=60, help="per probe selector (official: 60)")
    parser.add_argument("--no-probes", action="store_true", help="skip dependency probes (no ADPR)")
    parser.add_argument("--tasks", nargs="*", default=[], help="only these task ids")
    parser.add_argument("--protocol", choices=PROTOCOLS, default=None, help="protocol of lines that give none")
    parser.add_argument("--force", action="store_true", help="redo predictions already finished in this run")
    parser.add_argument("--rescore", action="store_true", help="regrade saved artifacts without containers")
    parser.add_argument("--pull", action="store_true", help="pull missing images by digest")
    parser.add_argument("--overlays-dir", type=Path, default=None,
                        help="checkout of the upstream AsynCodeBench repository: overlay patches are read from it "
                             "offline instead of fetched")
    parser.add_argument("--overlays-url", default=None,
                        help="base URL the overlay patches are fetched from (default: $ASYNCODEBENCH_OVERLAYS_URL, "
                             "else the upstream repository at the pinned commit)")
    parser.add_argument("--memory", default="4g", help="container memory limit (no swap)")
    parser.add_argument("--cpus", type=float, default=1.0)
    parser.add_argument("--pids", type=int, default=512, help="container process limit")
    args = parser.parse_args(argv)
    if args.max_workers < 1 or args.timeout < 1 or args.probe_timeout < 1:
        parser.error("--max-workers, --timeout and --probe-timeout must be positive")
    if args.rescore and not args.run_id:
        parser.error("--rescore needs the --run-id of the run to regrade")
    if not args.predictions.is_file():
        parser.error(f"{args.predictions} is not a file")
    settings = Settings(args.timeout, args.probe_timeout, not args.no_probes, Limits(args.memory, args.cpus, args.pids))
    return RunConfig(
        predictions=args.predictions, dataset=args.dataset, revision=args.revision,
        run_id=args.run_id or new_run_id(), output_dir=args.output_dir, max_workers=args.max_workers,
        tasks=tuple(args.tasks), default_protocol=args.protocol, force=args.force, rescore=args.rescore,
        pull=args.pull, overlays_dir=args.overlays_dir, overlays_url=args.overlays_url, settings=settings,
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    try:
        state = prepare_run(config)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for problem in state.file.problems:
        print(f"{config.predictions}:{problem.line}: {problem.kind}: {problem.message}", file=sys.stderr)
    from tqdm import tqdm

    print(f"run {config.run_id}: {len(state.file.predictions)} predictions -> {config.run_dir}", file=sys.stderr)
    try:
        with tqdm(total=len(state.file.predictions), desc="evaluating", unit="pred", file=sys.stderr) as bar:
            results = run(config, state, bar)
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished predictions are saved and the run's containers removed; resume with "
              f"--run-id {config.run_id}", file=sys.stderr)
        return 130
    report = build_report(run_metadata(config, state), state.file, results)
    store.write_json(config.run_dir / "report.json", report)
    plot = plot_resolution(report["predictions"], config.run_dir / "dependency_resolution.png")
    store.write_atomic(config.run_dir / "report.md", markdown(report, plot.name if plot else None))
    store.write_atomic(config.run_dir / "summary.csv", csv_text(report["summary"]))
    store.write_atomic(config.run_dir / "predictions.csv", csv_text(report["predictions"]))
    print(markdown(report).split("## Predictions")[0])
    if state.skipped_finished:
        print(f"resumed: {state.skipped_finished} predictions were already finished in run {config.run_id}")
    print(f"report: {config.run_dir / 'report.md'} (JSON, CSV{', PNG' if plot else ''} beside it)")
    if report["counts"]["infrastructure_errors"] or report["counts"]["not_evaluated"]:
        return 3
    return 1 if state.file.problems else 0


if __name__ == "__main__":
    sys.exit(main())
