"""How long `--help` takes, and what it loads, for every script: a newcomer's first command.

    python scripts/bench_help.py [--repeats 5] [--json out.json]

Each script runs as `python scripts/<name>.py --help` in a fresh interpreter (so nothing is cached in-process; the
OS file cache is warm after the first run), --repeats times; the table gives the median wall time, the peak memory
(max RSS) and the heavy third-party modules the run imported (found with `-X importtime`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Each takes tenths of a second to import; none is needed to parse arguments.
HEAVY = ("datasets", "pandas", "pyarrow", "docker", "jsonschema", "ray", "matplotlib", "numpy", "huggingface_hub")


def run_once(script: Path) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in KiB and stderr (the import times) of one `--help`."""
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-X", "importtime", str(script), "--help"], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=err)
        _, _, usage = os.wait4(process.pid, 0)  # the child's own rusage, which getrusage cannot give per child
        seconds = time.perf_counter() - start
        process.returncode = 0  # reaped above; stops Popen from waiting on it again
        err.seek(0)
        return seconds, usage.ru_maxrss, err.read()


def heavy_imports(importtime: str) -> list[str]:
    found = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.split(".")[0] in HEAVY:
                found.add(name.split(".")[0])
    return sorted(found)


def measure(script: Path, repeats: int) -> dict[str, Any]:
    runs = [run_once(script) for _ in range(repeats)]
    seconds = [r[0] for r in runs]
    return {"median_s": statistics.median(seconds), "max_s": max(seconds),
            "max_rss_mib": round(max(r[1] for r in runs) / 1024, 1), "heavy_imports": heavy_imports(runs[-1][2]),
            "repeats": repeats}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--folder", type=Path, default=ROOT / "scripts",
                        help="the scripts to time (e.g. an earlier version's, for before/after figures)")
    parser.add_argument("--only", nargs="*", default=None, help="only these script names")
    args = parser.parse_args()
    rows = {p.name: measure(p, args.repeats) for p in sorted(args.folder.glob("*.py"))
            if args.only is None or p.name in args.only}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.repeats}")
    print("| script | median s | max s | max RSS MiB | heavy imports |\n|---|---:|---:|---:|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['median_s']:.2f} | {row['max_s']:.2f} | {row['max_rss_mib']} | "
              f"{', '.join(row['heavy_imports']) or '-'} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
