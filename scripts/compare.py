"""Paired comparisons of evaluation runs, task by task.

    python scripts/compare.py RUN_DIR [RUN_DIR ...] -o compare.html [--json] [--allow-different-datasets]
                              [--allow-mixed]

Reads each run's report.json and compares (model, protocol) cells over the tasks both scored: each protocol against
`single` for the same model, each pair of models under the same protocol, and the same cell across runs. Per metric
(FSR, pass rate, ADPR, DRS, DRE, CAIL): the mean difference with a 95% paired bootstrap interval (10,000 resamples
of tasks, seed 42), the exact sign and Wilcoxon signed-rank tests, the number of tasks paired, and a reading:
"b better" or "b worse" only with at least 6 tasks paired, the interval excluding 0 and both p-values at most 0.05;
one task reads "one task: no inference". DRS and CAIL pair only tasks where both cells had the same checkpoint
count T. The page's notes give the rules in words, with links into docs/METRICS.md.

Writes the page (-o, default compare.html) with compare.csv and compare.json beside it (same name, other suffix);
--json prints the JSON record instead of the short summary. Runs on different dataset revisions (or local folders
with other contents) are refused unless --allow-different-datasets is given, runs of different kit versions or report
schema versions unless --allow-mixed is; the outputs then say so. Each report is checked against
schemas/report.schema.json first: one of another shape (an older kit's) is refused with the command to rescore it.

Exit codes: 0 written; 2 bad arguments (a run folder without a readable, schema-valid report.json, runs on
different datasets or kits without the flag, an output that cannot be written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from asyncodebench import cli


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (or their report.json files)")
    parser.add_argument("-o", "--output", type=Path, default=Path("compare.html"),
                        help="the HTML page; compare.csv and compare.json are written beside it")
    parser.add_argument("--json", action="store_true", help="print the JSON record on standard output")
    parser.add_argument("--allow-different-datasets", action="store_true",
                        help="compare runs made on different dataset revisions (the outputs say so)")
    parser.add_argument("--allow-mixed", action="store_true",
                        help="compare runs made by different kit versions or report schemas (the outputs say so)")
    args = parser.parse_args(argv)
    if args.output.suffix.lower() != ".html":
        parser.error(f"-o {args.output}: give a .html file name (compare.csv and compare.json go beside it)")
    for target in (args.output, args.output.with_suffix(".csv"), args.output.with_suffix(".json")):
        if target.is_dir():
            parser.error(f"-o: {target} is a folder; give a .html file name whose .csv and .json are no folders")
    problem = cli.writable_folder_problem(args.output.parent if str(args.output.parent) else Path("."))
    if problem:
        parser.error(f"-o: {problem}; give a folder you can write in")
    return args


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Imported after parsing, so --help loads no heavy dependency (tests/test_script_help.py).
    from asyncodebench.files import write_atomic
    from asyncodebench.reports.compare import compare_runs, csv_text, load_run
    from asyncodebench.reports.htmlcompare import render_compare
    from asyncodebench.run.store import write_json
    from asyncodebench.untrusted import terminal_text

    runs = []
    for path in args.runs:
        try:
            runs.append(load_run(path))
        except (OSError, ValueError) as exc:
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS,
                           f"{path}: cannot read a run report ({exc}); give a run folder holding report.json") from exc
    try:
        record = compare_runs(runs, allow_mixed=args.allow_different_datasets, allow_mixed_kits=args.allow_mixed)
    except ValueError as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
    try:
        write_json(args.output.with_suffix(".json"), record)
        write_atomic(args.output.with_suffix(".csv"), csv_text(record))
        write_atomic(args.output, render_compare(record))
    except OSError as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"-o {args.output}: cannot write ({exc.strerror or exc}); give a "
                       "file name in a folder you can write in") from exc
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        views = {}
        for c in record["comparisons"]:
            views[c["view"]] = views.get(c["view"], 0) + 1
        print(terminal_text(record["dataset_check"]["message"]))  # it names the runs' datasets and labels
        if not record["kit_check"]["consistent"]:
            print(terminal_text(record["kit_check"]["message"]))
        print(f"{len(record['cells'])} cells; comparisons (x {len(record['metrics'])} metrics): "
              + (", ".join(f"{view} {count // len(record['metrics'])}" for view, count in views.items()) or "none"))
        readings: dict[str, int] = {}
        for c in record["comparisons"]:
            readings[c["reading"]] = readings.get(c["reading"], 0) + 1
        print(terminal_text("readings (comparison x metric): "
                            + (", ".join(f"{k} {v}" for k, v in sorted(readings.items())) or "none")))
        print(f"compare: {args.output} (CSV and JSON beside it)")
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
