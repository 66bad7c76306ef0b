"""Score predictions against AsynCodeBench in the tasks' pinned containers.

    python scripts/evaluate.py preds.jsonl                       # Hub dataset at v0.4.2
    python scripts/evaluate.py preds.jsonl --dataset ./published --run-id try1 --max-workers 2
    python scripts/evaluate.py preds.jsonl --executor ray --ray-address HEAD:6379   # on a Ray cluster's nodes
    python scripts/evaluate.py preds.jsonl --run-id try1 --rescore   # regrade saved artifacts, no containers

Every line is checked against schemas/prediction.schema.json; bad lines are reported with their numbers and
skipped, the others evaluated. Rerunning a run id resumes it. Outputs go to <output-dir>/<run-id>/:
report.json, report.md, report.html, summary.csv, predictions.csv, dependency_resolution.png, one folder per
prediction (with its timeline.html: scripts/show_run.py redraws it).

A run folder is held by one process at a time (a second one is refused), and keeps the settings its results were
made with (settings.json): resuming with another dataset, probes, timeouts or limits is refused; --force
re-evaluates everything with the new ones.

Exit codes: 0 every valid line evaluated; 1 some lines were invalid, or the file holds no prediction; 2 bad
arguments (also: the run folder is in use by another process, its settings differ, or --rescore finds nothing to
regrade); 3 infrastructure errors (the Hub unreachable, the daemon or the Ray cluster, images, overlays: rerun the
same run id once fixed); 130 interrupted (Ctrl-C; rerun the same run id to resume); 143 stopped by SIGTERM, with
the same clean-up as Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from asyncodebench import cli
from asyncodebench.dataset.protocols import PROTOCOLS
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION, DatasetUnavailableError
from asyncodebench.untrusted import terminal_text  # light, as cli: what the run prints echoes predictions

# The rest of the kit is imported once the arguments are parsed: --help and a bad flag answer at once.
if TYPE_CHECKING:
    from asyncodebench.run.config import RunConfig, RunState
    from asyncodebench.run.prediction_result import PredictionResult


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound exactly as Ctrl-C is: the run's containers are removed, finished work is kept."""


def terminate(*_: object) -> None:
    raise Terminated()


def parse_args(argv: list[str] | None) -> RunConfig:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("predictions", type=Path, help="JSONL (or a JSON list) of predictions")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    parser.add_argument("--run-id", type=cli.run_id, default=None,
                        help="names the run folder (letters, digits, '.', '_', '-'); reuse it to resume")
    parser.add_argument("--output-dir", type=Path, default=Path("runs"))
    parser.add_argument("--max-workers", type=cli.positive_int, default=None,
                        help="predictions evaluated at once (default: 1 locally; with --executor ray, as many as "
                             "the cluster's resources hold)")
    parser.add_argument("--executor", choices=["local", "ray"], default="local",
                        help="where predictions are evaluated: this machine's Docker daemon, or the Docker nodes of "
                             "a Ray cluster (pip install 'asyncodebench[ray]'); results are the same, and a run "
                             "started with one resumes with the other")
    parser.add_argument("--ray-address", default=None,
                        help="the Ray cluster (HOST:PORT of its head; default: $RAY_ADDRESS, else the cluster "
                             "started on this machine)")
    parser.add_argument("--ray-resources", type=_ray_resources, default={}, metavar="JSON",
                        help='custom resources every Ray task also asks for, e.g. \'{"pool_a": 0.01}\' to run '
                             "only on the nodes that offer them")
    cli.add_limit_arguments(parser)
    parser.add_argument("--no-probes", action="store_true",
                        help="skip dependency probes (ADPR, DRS, DRE, CAIL are then n/a)")
    parser.add_argument("--tasks", nargs="*", default=[], help="only these task ids")
    parser.add_argument("--protocol", choices=PROTOCOLS, default=None, help="protocol of lines that give none")
    parser.add_argument("--force", action="store_true",
                        help="redo predictions already finished in this run (and accept changed settings)")
    parser.add_argument("--rescore", action="store_true", help="regrade saved artifacts without containers")
    parser.add_argument("--pull", action="store_true", help="pull missing images by digest")
    parser.add_argument("--overlays-dir", type=Path, default=None,
                        help="checkout of the upstream AsynCodeBench repository: overlay patches are read from it "
                             "offline instead of fetched")
    parser.add_argument("--images", type=Path, default=None, metavar="MAP",
                        help="an image map (schemas/image_map.schema.json): run these tasks on the images it names, "
                             "e.g. rebuilt ones, instead of the rows' official images")
    parser.add_argument("--overlays-url", default=None,
                        help="base URL the overlay patches are fetched from (default: $ASYNCODEBENCH_OVERLAYS_URL, "
                             "else the upstream repository at the pinned commit)")
    monitor = parser.add_argument_group(
        "monitor model (optional; docs/integrity.md): reads flagged patches after the run, never scores")
    monitor.add_argument("--monitor-model", default=None, metavar="M",
                         help="a model that reviews each prediction with high-severity review flags and says whether "
                              "it games the grading; a suspicious verdict makes the result needs_review")
    monitor.add_argument("--monitor-base-url", default=None, metavar="URL",
                         help="its OpenAI-compatible endpoint (default: none, M is a litellm model id)")
    monitor.add_argument("--monitor-api-key-env", default=None, metavar="VAR",
                         help="the environment variable holding its key (default: OPENAI_API_KEY with a base URL)")
    monitor.add_argument("--monitor", choices=["flagged", "all"], default="flagged",
                         help="which evaluated predictions it reads")
    monitor.add_argument("--monitor-retry-seconds", type=cli.positive_seconds, default=600.0, metavar="S",
                         help="how long one failing monitor call is retried before it is recorded as unreachable")
    args = parser.parse_args(argv)
    if (args.monitor_base_url or args.monitor_api_key_env or args.monitor != "flagged"
            or args.monitor_retry_seconds != 600.0) and not args.monitor_model:
        parser.error("--monitor-base-url, --monitor-api-key-env, --monitor and --monitor-retry-seconds go with "
                     "--monitor-model")
    if args.rescore and not args.run_id:
        parser.error("--rescore needs the --run-id of the run to regrade")
    if (args.executor == "ray" or args.ray_address or args.ray_resources) and not args.rescore:
        from asyncodebench.run.ray_executor import ray_available

        if args.executor != "ray":
            parser.error("--ray-address and --ray-resources go with --executor ray")
        if not ray_available():
            parser.error("--executor ray needs Ray on this machine: pip install 'asyncodebench[ray]' (in the kit: "
                         ".venv/bin/python -m pip install -e '.[ray]')")
    if not args.predictions.is_file():
        parser.error(f"{args.predictions} is not a file")
    problem = cli.writable_folder_problem(args.output_dir)
    run_dir = args.output_dir / args.run_id if args.run_id else None
    if problem is None and run_dir is not None and run_dir.exists():
        problem = cli.writable_folder_problem(run_dir)
    if problem:
        parser.error(f"--output-dir: {problem}; give a folder you can write in")
    from asyncodebench.harness.evaluation import new_run_id
    from asyncodebench.run.config import MonitorSettings, RunConfig

    settings = cli.settings(args, run_probes=not args.no_probes)
    return RunConfig(
        predictions=args.predictions, dataset=args.dataset, revision=args.revision,
        run_id=args.run_id or new_run_id(), output_dir=args.output_dir, max_workers=args.max_workers,
        tasks=tuple(args.tasks), default_protocol=args.protocol, force=args.force, rescore=args.rescore,
        pull=args.pull, overlays_dir=args.overlays_dir, overlays_url=args.overlays_url, settings=settings,
        images=args.images, executor=args.executor, ray_address=args.ray_address,
        ray_resources=tuple(sorted(args.ray_resources.items())),
        monitor=MonitorSettings(args.monitor_model, args.monitor_base_url, args.monitor_api_key_env, args.monitor,
                                args.monitor_retry_seconds) if args.monitor_model else None,
    )


def _monitor(config: RunConfig, state: RunState, results: list[PredictionResult]) -> list[PredictionResult]:
    """Ask the monitor model about the run's results (agents.monitor); the results as they are afterwards."""
    from asyncodebench.agents.adapter import CallLimits, ModelEndpoint
    from asyncodebench.agents.monitor import monitor_run
    from asyncodebench.run import store
    from asyncodebench.run.runfolder import prediction_folder

    settings = config.monitor
    assert settings is not None
    endpoint = ModelEndpoint(settings.model, settings.base_url, settings.api_key_env,
                             CallLimits(retry_seconds=settings.retry_seconds, agent_seconds=None))
    counts = monitor_run(config.run_dir, list(state.file.predictions), endpoint, settings.which,
                         progress=lambda line: print(terminal_text(line), file=sys.stderr))
    print(f"monitor {terminal_text(settings.model)}: {counts['answered']} answered ({counts['suspicious']} "
          f"suspicious), {counts['unusable']} unusable, {counts['unreachable']} unreachable (asked again when the "
          "same run id is run again)", file=sys.stderr)
    folders = [prediction_folder(config.run_dir, p) for p in state.file.predictions]
    return store.read_results(folders)


def _ray_resources(text: str) -> dict[str, float]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, (int, float)) and v > 0
                                              for k, v in value.items()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object of resource names to amounts above 0, "
                                         'such as \'{"pool_a": 0.01}\'')
    return {k: float(v) for k, v in value.items()}


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = parse_args(argv)
    from asyncodebench.run.runfolder import RunFolderBusyError, RunLock, SettingsChangedError
    from asyncodebench.run.runner import claim_settings, prepare_run, rescore_problem

    signal.signal(signal.SIGTERM, terminate)
    try:
        state = prepare_run(config)
    except DatasetUnavailableError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    except (ValueError, OSError) as exc:  # an unknown task, no such dataset folder, an unreadable file
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
    for problem in state.file.problems:  # the message echoes the line's own text: one line, nothing it could run
        print(terminal_text(f"{config.predictions}:{problem.line}: {problem.kind}: {problem.message}"),
              file=sys.stderr)
    if not state.file.predictions and not state.file.problems:
        raise cli.Exit(cli.EXIT_PROBLEMS_FOUND, f"{config.predictions} holds no predictions, so there is nothing to "
                       "evaluate; give a JSONL file with one prediction per line (or a JSON list of them)")
    if config.rescore and (problem := rescore_problem(config, state)):
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, problem)
    try:
        with RunLock(config.run_dir):
            config = claim_settings(config, state)
            return evaluate(config, state, argv)
    except (RunFolderBusyError, SettingsChangedError) as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc


def evaluate(config: RunConfig, state: RunState, argv: list[str]) -> int:
    """Run (or rescore) while holding the run folder; write the reports; the exit code. `argv`: the arguments
    given, for the command that resumes the run."""
    from tqdm import tqdm

    from asyncodebench.reports.htmlreport import write_report_html
    from asyncodebench.reports.plots import plot_resolution
    from asyncodebench.reports.report import build_report, csv_text, dependency_points, markdown
    from asyncodebench.reports.timeline_files import write_run_timelines
    from asyncodebench.run import store
    from asyncodebench.run.runner import begin_session, end_session, run, run_metadata

    print(f"run {config.run_id}: {len(state.file.predictions)} predictions -> {config.run_dir}", file=sys.stderr)
    begin_session(config, state)
    try:
        with tqdm(total=len(state.file.predictions), desc="evaluating", unit="pred", file=sys.stderr) as bar:
            results = run(config, state, bar)
    except KeyboardInterrupt as stop:
        end_session(config, state, "interrupted")
        print("\ninterrupted: finished predictions are saved and the run's containers removed; resume with:\n  "
              + cli.resume_command(__file__, argv, config.run_id), file=sys.stderr)
        return cli.EXIT_TERMINATED if isinstance(stop, Terminated) else cli.EXIT_INTERRUPTED
    if config.monitor is not None:
        results = _monitor(config, state, results)
    every_session = end_session(config, state, "finished")
    metadata = {**run_metadata(config, state, every_session), "dependency_points": dependency_points(state.specs)}
    report = build_report(metadata, state.file, results)
    # The reports first: the plot is an extra that must never cost them.
    store.write_json(config.run_dir / "report.json", report)
    store.write_atomic(config.run_dir / "report.md", markdown(report))
    store.write_atomic(config.run_dir / "summary.csv", csv_text(report["summary"]))
    store.write_atomic(config.run_dir / "predictions.csv", csv_text(report["predictions"]))
    try:
        write_report_html(report, config.run_dir / "report.html")
    except Exception as exc:  # like the plot: an extra drawn from report.json, which stands without it
        print(terminal_text(f"warning: report.html was not written ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:300]}); the other reports are complete"), file=sys.stderr)
    try:  # one timeline page per prediction, in its folder: an extra too
        write_run_timelines(config.run_dir, report)
    except Exception as exc:
        print(terminal_text(f"warning: the timeline pages were not written ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:300]}); the other reports are complete"), file=sys.stderr)
    plot = None
    try:
        plot = plot_resolution(report["predictions"], config.run_dir / "dependency_resolution.png")
    except Exception as exc:  # matplotlib, fonts, the disk: a warning, the reports stand
        print(terminal_text(f"warning: the dependency resolution plot was not written ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:300]}); the reports are complete without it"),
              file=sys.stderr)
    if plot:
        store.write_atomic(config.run_dir / "report.md", markdown(report, plot.name))
    print(terminal_text(markdown(report).split("## Predictions")[0], newlines=True))
    if state.skipped_finished:
        print(f"resumed: {state.skipped_finished} predictions were already finished in run {config.run_id}")
    print(f"report: {config.run_dir / 'report.md'} (JSON, CSV, HTML{', PNG' if plot else ''} beside it)")
    if report["counts"]["infrastructure_errors"] or report["counts"]["not_evaluated"]:
        return cli.EXIT_INFRASTRUCTURE
    return cli.EXIT_PROBLEMS_FOUND if state.file.problems else cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
