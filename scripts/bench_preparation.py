"""Measure what preparing large and deep patched trees costs, in real containers of the demo image (issue 16).

    python scripts/bench_preparation.py                               # the demo dataset is built when omitted
    python scripts/bench_preparation.py --dataset build/demo/dataset --repeats 3 --json

Each patch is prepared as the harness prepares every state, in a fresh container per repeat: the image's tree
copied, the base revision, the patch applied as the sandbox user, the tree judged, restored, committed and handed
over. Per patch the table gives the files it adds, the median seconds of `prepare` (the in-container preparation
and reading its record), of the host's check of the patch text (`touched_paths`, done once per container too),
and what the preparation recorded. The goal: each of 60,000 files and 30,000 bytecode files under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "scripts")]

from bench_harness import DEMO_TASK, demo_dataset, task_spec  # noqa: E402
from helpers.payloads.tree import added, deep_path, many_files  # noqa: E402

from asyncodebench.harness.evaluation import Settings, Workbench  # noqa: E402
from asyncodebench.harness.sandbox import IO_DIR, Limits, docker_client, remove_run_containers  # noqa: E402
from asyncodebench.harness.workspace import Preparation, prepare  # noqa: E402
from asyncodebench.scoring.patches import touched_paths  # noqa: E402

RUN_ID = "bench-preparation"


def patches(files: int, bytecode: int, levels: int) -> list[tuple[str, int, str]]:
    """(label, files added, patch) of each measured patch."""
    return [
        ("empty patch", 0, ""),
        (f"{files:,} small files", files, many_files(files, "bulk/{group:02d}/f{i}.txt")),
        (f"{bytecode:,} bytecode files (hazards)", bytecode,
         many_files(bytecode, "minicache/__pycache__/m{i}.cpython-311.pyc")),
        (f"one file {levels:,} folders deep", 1, added(deep_path(levels, "leaf.txt"), "deep\n")),
    ]


def prepare_once(bench: Workbench, patch: bytes) -> tuple[float, Preparation]:
    """Seconds of one preparation in a fresh container (started and removed outside the measure)."""
    with bench.sandbox() as box:
        box.write_files(bench.inputs(patch), IO_DIR)
        started = time.perf_counter()
        preparation = prepare(box, bench.spec.interpreter, bench.spec.task_id)
        return time.perf_counter() - started, preparation


def measure(bench: Workbench, label: str, files: int, patch: str, repeats: int) -> dict[str, Any]:
    raw = patch.encode()
    started = time.perf_counter()
    touched_paths(patch)
    check = time.perf_counter() - started
    runs = [prepare_once(bench, raw) for _ in range(repeats)]
    preparation = runs[-1][1]
    return {"patch": label, "files": files, "patch_bytes": len(raw),
            "prepare_s": statistics.median(seconds for seconds, _ in runs), "host_check_s": check,
            "patch_status": preparation.patch_status, "unusable_reason": preparation.unusable_reason,
            "changed_paths": len(preparation.changed_paths), "hazards_removed": len(preparation.hazards_removed)}


def table(rows: list[dict[str, Any]], command: str, repeats: int) -> str:
    lines = [f"`{command}` (demo image; {repeats} repeat(s), median; {os.cpu_count()} CPUs, "
             f"load average {os.getloadavg()[0]:.1f} at the end)", "",
             "| patch | files | patch size | prepare | host check | patch_status | changed | hazards removed |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        status = r["patch_status"] + (f" ({r['unusable_reason']})" if r["unusable_reason"] else "")
        lines.append(f"| {r['patch']} | {r['files']:,} | {r['patch_bytes'] / 1e6:.1f} MB | {r['prepare_s']:.1f} s "
                     f"| {r['host_check_s']:.1f} s | {status} | {r['changed_paths']:,} | {r['hazards_removed']:,} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=None,
                        help="the demo's published dataset folder (default: built here)")
    parser.add_argument("--files", type=int, default=60_000, help="small files of the first large patch")
    parser.add_argument("--bytecode", type=int, default=30_000, help="bytecode files of the second large patch")
    parser.add_argument("--levels", type=int, default=1100, help="folders above the deep patch's file")
    parser.add_argument("--repeats", type=int, default=1, help="preparations per patch; the median is reported")
    parser.add_argument("--memory", default=Limits().memory, help="the container's memory limit (default: the "
                                                                   "harness's)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    client = docker_client()
    with tempfile.TemporaryDirectory(prefix="bench-dataset-") as tmp:
        spec = task_spec(args.dataset or demo_dataset(Path(tmp)), DEMO_TASK)
        bench = Workbench.open(client, spec, RUN_ID, Settings(limits=Limits(memory=args.memory)), {})
        try:
            rows = [measure(bench, label, files, patch, args.repeats)
                    for label, files, patch in patches(args.files, args.bytecode, args.levels)]
        finally:
            remove_run_containers(client, RUN_ID)
    command = "python scripts/bench_preparation.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(table(rows, command.strip(), args.repeats))
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
