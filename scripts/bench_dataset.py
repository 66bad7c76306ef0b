"""Measure how long building and loading the AsynCodeBench dataset takes, and print a Markdown table.

    python scripts/bench_dataset.py                      # 5 runs of each step
    python scripts/bench_dataset.py --runs 3 --json bench.json

Steps:
- build: `export()` of the three configurations from data/ into a scratch folder (what `python AsynCodeBench.py` does);
- pandas: `pandas.read_parquet` of the three committed Parquet files;
- hub (cold / warm): `load_dataset(..., revision="v0.4.2")` of the three configurations through a local olah mirror
  of the assembled Hub folder, with an empty cache and then with the cache the first load left;
- builder: `download_and_prepare()` + `as_dataset()` of the three configurations, each run with an empty cache.

Hub loads run in a fresh interpreter each (`datasets` reads HF_ENDPOINT when imported); their figure is the time of
the load calls inside it, not the interpreter start. Every other step runs in this process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ("tasks", "scenarios", "dependencies")
HUB_LOAD = """
import sys, time
from datasets import load_dataset
started = time.perf_counter()
counts = [len(load_dataset(sys.argv[1], c, split="test", revision=sys.argv[2])) for c in sys.argv[3].split(",")]
print(time.perf_counter() - started, counts)
"""


@cache
def builder_class() -> type:
    spec = importlib.util.spec_from_file_location("AsynCodeBench", ROOT / "AsynCodeBench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass config resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module.AsynCodeBench


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def bench_build(runs: int) -> list[float]:
    from asyncodebench.dataset.export import export

    cls = builder_class()
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as out:
            times.append(timed(lambda: export(cls, ROOT / "data", Path(out))))
    return times


def bench_pandas(runs: int) -> list[float]:
    import pandas as pd

    from asyncodebench.dataset.export import parquet_path

    return [timed(lambda: [pd.read_parquet(parquet_path(ROOT, c)) for c in CONFIGS]) for _ in range(runs)]


def bench_builder(runs: int) -> list[float]:
    cls = builder_class()

    def load_all(cache: str) -> None:
        for config in CONFIGS:
            builder = cls(config_name=config, cache_dir=cache)
            builder.download_and_prepare()
            builder.as_dataset(split="test")

    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            times.append(timed(lambda: load_all(cache)))
    return times


def bench_hub(runs: int, work: Path) -> tuple[list[float], list[float]]:
    """Cold loads (each with a new, empty HF_HOME) and warm loads (reusing the HF_HOME of a previous load)."""
    from asyncodebench.dataset import hub_mirror
    from asyncodebench.dataset.publish import assemble
    from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION

    assemble(work / "hub")
    hub_mirror.commit_revision(work / "mirrors" / "datasets" / DEFAULT_DATASET, work / "hub", DEFAULT_REVISION)
    with hub_mirror.serve(work / "mirrors", DEFAULT_DATASET) as mirror:
        def load(hf_home: Path) -> float:
            env = {**os.environ, "HF_ENDPOINT": mirror.endpoint, "HF_HOME": str(hf_home)}
            env.pop("HF_HUB_OFFLINE", None)
            args = [DEFAULT_DATASET, DEFAULT_REVISION, ",".join(CONFIGS)]
            done = subprocess.run([sys.executable, "-c", HUB_LOAD, *args], env=env, capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                raise RuntimeError(f"loading through the mirror failed (olah log: {mirror.log_path}):\n{done.stderr}")
            return float(done.stdout.split()[0])

        cold = [load(work / f"cold-{i}") for i in range(runs)]
        warm = [load(work / "cold-0") for _ in range(runs)]
    return cold, warm


def table(results: dict[str, list[float]]) -> str:
    lines = ["| step | median (s) | min (s) | max (s) | runs |", "|---|---:|---:|---:|---:|"]
    for step, times in results.items():
        lines.append(f"| {step} | {statistics.median(times):.3f} | {min(times):.3f} | {max(times):.3f} "
                     f"| {len(times)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per step (default 5); the table shows the median")
    parser.add_argument("--json", type=Path, help="also write the raw timings and the environment here")
    args = parser.parse_args(argv)
    results = {
        "build: export 3 configs to Parquet": bench_build(args.runs),
        "load: pandas.read_parquet, 3 files": bench_pandas(args.runs),
    }
    with tempfile.TemporaryDirectory() as work:
        cold, warm = bench_hub(args.runs, Path(work))
    results["load: load_dataset via Hub mirror, cold cache"] = cold
    results["load: load_dataset via Hub mirror, warm cache"] = warm
    results["load: builder download_and_prepare + as_dataset"] = bench_builder(args.runs)
    print(table(results))
    if args.json:
        import datasets

        environment = {"python": platform.python_version(), "datasets": datasets.__version__,
                       "platform": platform.platform(), "cpus": os.cpu_count()}
        args.json.write_text(json.dumps({"environment": environment, "seconds": results}, indent=2) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
