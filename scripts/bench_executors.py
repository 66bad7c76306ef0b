"""Wall time of scripts/evaluate.py with the local executor and with the Ray executor, on one machine.

    python scripts/bench_executors.py                                  # the demo task (built if needed), 3 rounds
    python scripts/bench_executors.py --dataset build/demo/dataset --rounds 5 --json bench.json

The 12 quick demo predictions of scripts/bench_harness.py are evaluated, each time in a new run folder (base state
included), by: the local executor with 1 and 2 workers, and the Ray executor on a loopback cluster started here
(asyncodebench.run.local_ray) with one worker node of 1 slot, one of 2 slots, and two of 1 slot each. A slot is one
prediction at a time: every prediction runs up to two containers of --cpus 0.5, so it asks Ray for one CPU, and a
node of N slots offers N CPUs. Runs are alternated round by round and the median wall time of each is reported,
with the ratios that matter: Ray against local at the same number of workers, and two worker nodes against one.
The driver's connection to the cluster counts; starting the cluster does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from asyncodebench.run.local_ray import LocalCluster  # noqa: E402

MODELS = ["demo-gold", "demo-empty", "demo-partial", "demo-syntax-error", "hostile-conftest", "hostile-test-edit",
          "hostile-forged-output", "hostile-network", "hostile-huge-output", "hostile-binary-diff",
          "hostile-dotdot-path", "hostile-absolute-path"]  # as scripts/bench_harness.py's throughput
FLAGS = ("--timeout", "20", "--probe-timeout", "10", "--cpus", "0.5", "--memory", "1g")
# name -> (executor flags, workers): the Ray runs are sent to nodes by a custom resource each node offers.
CONFIGS = {
    "local, 1 worker": (("--max-workers", "1"), 1),
    "local, 2 workers": (("--max-workers", "2"), 2),
    "ray, 1 node x 1 slot": (("--ray-resources", '{"one": 0.01}'), 1),
    "ray, 1 node x 2 slots": (("--ray-resources", '{"double": 0.01}'), 2),
    "ray, 2 nodes x 1 slot": (("--ray-resources", '{"pair": 0.01}'), 2),
}
NODES = {"node-a": (1, {"one": 1, "pair": 1}), "node-b": (1, {"pair": 1}), "node-c": (2, {"double": 1})}


def demo_dataset(out: Path) -> Path:
    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.images.demo import DEMO_TASK_YAML, build
    from asyncodebench.images.registry import registry_port_from_env

    image = build(registry_port_from_env())
    write_rows(build_task_rows(DEMO_TASK_YAML, ROOT / "data" / "protocols.yaml", digest=image.digest), out)
    return out


def evaluate(predictions: Path, dataset: Path, out: Path, run_id: str, flags: tuple[str, ...]) -> float:
    command = [sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(predictions), "--dataset", str(dataset),
               "--run-id", run_id, "--output-dir", str(out), *FLAGS, *flags]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    report = json.loads((out / run_id / "report.json").read_text()) if done.returncode == 0 else None
    if report is None or report["counts"]["evaluated"] != len(MODELS):
        raise SystemExit(f"error: {run_id} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=None, help="published demo folder (default: built here)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write the raw timings here")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="acb-bench-", dir="/tmp"))
    dataset = args.dataset or demo_dataset(scratch / "dataset")
    examples = {json.loads(line)["model_name_or_path"]: line
                for line in (ROOT / "data/demo/predictions/examples.jsonl").read_text().splitlines() if line.strip()}
    predictions = scratch / "preds.jsonl"
    predictions.write_text("".join(examples[m] + "\n" for m in MODELS))
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with LocalCluster(scratch / "cluster") as cluster:
        for name, (cpus, resources) in NODES.items():
            cluster.add_worker(name, cpus, {"docker": 1, **resources}, wait=False)
        cluster.wait_ready(*NODES)
        ray = ("--executor", "ray", "--ray-address", cluster.address)
        for round_ in range(args.rounds):
            order = list(CONFIGS)[round_ % len(CONFIGS):] + list(CONFIGS)[:round_ % len(CONFIGS)]
            for name in order:
                flags, _ = CONFIGS[name]
                run_id = f"r{round_}-{name.replace(' ', '').replace(',', '-')}"
                seconds = evaluate(predictions, dataset, scratch / "runs", run_id,
                                   (*ray, *flags) if name.startswith("ray") else flags)
                times[name].append(seconds)
                print(f"round {round_ + 1}: {name}: {seconds:.1f} s", file=sys.stderr)
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"| run ({len(MODELS)} demo predictions) | workers | median (s) | min (s) | max (s) | predictions/min |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (_, workers) in CONFIGS.items():
        print(f"| {name} | {workers} | {median[name]:.1f} | {min(times[name]):.1f} | {max(times[name]):.1f} | "
              f"{60 * len(MODELS) / median[name]:.1f} |")
    ratios = {  # wall time against wall time; the last one is a throughput ratio (the inverse)
        "wall time, ray 1 node x 1 slot / local 1 worker": median["ray, 1 node x 1 slot"] / median["local, 1 worker"],
        "wall time, ray 1 node x 2 slots / local 2 workers":
            median["ray, 1 node x 2 slots"] / median["local, 2 workers"],
        "wall time, ray 2 nodes x 1 slot / local 2 workers":
            median["ray, 2 nodes x 1 slot"] / median["local, 2 workers"],
        "throughput, ray 2 nodes x 1 slot / 1 node x 1 slot":
            median["ray, 1 node x 1 slot"] / median["ray, 2 nodes x 1 slot"],
    }
    print()
    for what, ratio in ratios.items():
        print(f"- {what}: {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"models": MODELS, "flags": FLAGS, "seconds": times, "median": median,
                                         "ratios": ratios}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
