"""Recompute the dependency metrics of a recorded run from its checkpoint file, without containers.

    python scripts/rescore_checkpoints.py dependency_probe_checkpoints.jsonl --task asyncodebench:cachetools
    python scripts/rescore_checkpoints.py run/dependency_probe_checkpoints.jsonl --task ... --dataset ./published --json

Reads a `dependency_probe_checkpoints.jsonl` in the upstream layout (METRICS 0.1), as written by the upstream
harness or by `scripts/evaluate.py`, with the task's dependency rows, and prints T, ADPR, DRS, DRE, CAIL and the
unresolved count, per dependency and per run. Files that are malformed, not UTF-8 text, out of order, lack the final
integrated checkpoint or miss selectors are refused with the line and the problem; a UTF-8 byte-order mark is fine.

--dataset takes a Hub id or a published dataset folder: the one holding data/<config>/test-*.parquet (the kit's
root, `.`) or that `data` folder itself.

Exit codes: 0 scored; 1 the file was refused; 2 bad arguments (no such file, no such dataset or task); 3 the Hub
(for a Hub dataset) is unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.scoring.checkpoints import CheckpointFileError, load_checkpoint_file
from asyncodebench.scoring.dependency import DependencyPoint, RunMetrics, run_metrics


def table(metrics: RunMetrics) -> str:
    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [
        f"T = {metrics.checkpoint_count}; ADPR = {metrics.final_pass_count}/{metrics.dependency_count}"
        f" = {num(metrics.adpr)}; unresolved = {metrics.unresolved_count}; mean DRS (penalized) = "
        f"{num(metrics.drs_penalized_mean)}; mean DRE = {num(metrics.dre_mean)}; mean CAIL (penalized) = "
        f"{num(metrics.cail_penalized_mean)}", "",
        "| dependency | up | down | DRS | DRS pen. | DRE | CAIL raw | CAIL pen. | final pass |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in metrics.dependencies:
        lines.append(f"| {d.dependency_id} | {d.up or '-'} | {d.down or '-'} | {d.drs or '-'} | {d.drs_penalized} | "
                     f"{num(d.dre)} | {d.cail_raw if d.cail_raw is not None else '-'} | {d.cail_penalized} | "
                     f"{'yes' if d.final_integrated_pass else 'no'} |")
    if not metrics.has_final_checkpoint:
        lines.append("\nwarning: no final_integrated checkpoint; the run is invalid for tables")
    return "\n".join(lines)


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", type=Path, help="a dependency_probe_checkpoints.jsonl file")
    parser.add_argument("--task", required=True, help="the task id the file belongs to")
    parser.add_argument("--dataset", default=DEFAULT_DATASET,
                        help="Hub id, or a local published folder (`.` in the kit, or its `data` folder)")
    parser.add_argument("--revision", default=DEFAULT_REVISION)
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    args = parser.parse_args(argv)
    if not args.checkpoints.is_file():
        parser.error(f"{args.checkpoints} is not a file; give a dependency_probe_checkpoints.jsonl")
    rows = cli.load_rows(args.dataset, args.revision).rows
    dependencies = [DependencyPoint.from_row(r) for r in rows.dependencies if r["task_id"] == args.task]
    if not dependencies:
        known = sorted({r["task_id"] for r in rows.dependencies})
        parser.error(f"the dataset has no dependency rows for task {args.task!r}; tasks with dependency rows: "
                     f"{', '.join(known)}")
    try:
        checkpoints = load_checkpoint_file(args.checkpoints, dependencies)
    except (CheckpointFileError, OSError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return cli.EXIT_PROBLEMS_FOUND
    metrics = run_metrics(checkpoints, dependencies)
    print(json.dumps(asdict(metrics), indent=2) if args.json else table(metrics))
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
