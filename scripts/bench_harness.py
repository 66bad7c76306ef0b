"""Measure what the evaluation harness costs on the demo task (gold patch), against the bare evaluator.

    python scripts/bench_harness.py                      # builds the demo image and dataset if needed
    python scripts/bench_harness.py --dataset build/demo-dataset --repeats 5 --json

(a) overhead: wall time of one full evaluation (`evaluate_patch`: container start, preparation, evaluator, [probes],
    removal) divided by the bare evaluator command run with `docker exec` in an already running container of the
    same image, gold patch applied (median of --repeats);
(b) probe phase: the batched `run_probes` against one pytest process per selector (the upstream method, reference
    in tests/per_selector.py); the statuses are asserted equal;
(c) throughput: predictions per minute of scripts/evaluate.py on 12 demo predictions, --max-workers 1 and 2.
Prints a Markdown table (and JSON with --json).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package, and the per-selector reference

from asyncodebench.evaluation import Settings, Workbench, evaluate_patch  # noqa: E402
from asyncodebench.probes import selector_results  # noqa: E402
from asyncodebench.rows import load_published  # noqa: E402
from asyncodebench.sandbox import docker_client, remove_run_containers  # noqa: E402
from asyncodebench.spec import TaskSpec  # noqa: E402
from per_selector import ReferenceBox  # noqa: E402

DEMO = ROOT / "data" / "demo"
GOLD = (DEMO / "patches" / "gold.patch").read_bytes()
THROUGHPUT_MODELS = ["demo-gold", "demo-empty", "demo-partial", "demo-syntax-error", "hostile-conftest",
                     "hostile-test-edit", "hostile-forged-output", "hostile-network", "hostile-huge-output",
                     "hostile-binary-diff", "hostile-dotdot-path", "hostile-absolute-path"]


def median_seconds(action: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def demo_dataset(out: Path) -> Path:
    from asyncodebench.build import build_task_rows
    from asyncodebench.demo_image import DEMO_TASK_YAML, build, registry_port_from_env
    from asyncodebench.export import write_rows

    image = build(registry_port_from_env())
    write_rows(build_task_rows(DEMO_TASK_YAML, ROOT / "data" / "protocols.yaml", digest=image.digest), out)
    return out


def demo_spec(dataset: Path) -> TaskSpec:
    rows = load_published(str(dataset)).rows
    return TaskSpec.from_rows(rows.tasks[0], rows.dependencies)


def gold_box(client: Any, spec: TaskSpec) -> ReferenceBox:
    """A plain running container of the image with the gold patch applied (the bare evaluator's setting)."""
    box = ReferenceBox(client, spec)
    box.set_state(GOLD)
    return box


def overhead(client: Any, spec: TaskSpec, repeats: int, timeout: int, probe_timeout: int) -> dict[str, float]:
    with gold_box(client, spec) as box:
        bare_command = shlex.join([spec.interpreter, "-m", "pytest", *spec.pytest_options, *spec.test_targets])
        argv = ["docker", "exec", "-w", spec.workdir, box.container.name, "sh", "-c", f"{bare_command} >/dev/null 2>&1"]
        bare = median_seconds(lambda: subprocess.run(argv, check=False), repeats)
    figures = {"bare_evaluator_s": bare}
    try:
        for probes in (False, True):
            settings = Settings(timeout, probe_timeout, probes)
            key = f"full_evaluation_probes_{'on' if probes else 'off'}_s"
            figures[key] = median_seconds(lambda: evaluate_patch(client, spec, GOLD, "bench", settings, {}), repeats)
    finally:
        remove_run_containers(client, "bench")
    return figures


def probe_phase(client: Any, spec: TaskSpec, repeats: int, probe_timeout: int) -> dict[str, float]:
    batched = per_selector = {}
    bench = Workbench.open(client, spec, "bench", Settings(probe_timeout=probe_timeout), {})

    def ours() -> None:
        nonlocal batched
        _, run = bench.probe(GOLD)
        batched = {s: r.status for s, r in selector_results(run, spec.selectors).items()}

    with gold_box(client, spec) as box:
        def upstream() -> None:
            nonlocal per_selector
            per_selector = {s: r.status for s, r in box.per_selector_results(probe_timeout).items()}

        try:
            figures = {"batched_probes_s": median_seconds(ours, repeats),
                       "per_selector_probes_s": median_seconds(upstream, repeats), "selectors": len(spec.selectors)}
        finally:
            remove_run_containers(client, "bench")
    if batched != per_selector:
        raise AssertionError(f"batched and per-selector statuses differ: {batched} != {per_selector}")
    return figures


def throughput(dataset: Path, timeout: int, probe_timeout: int) -> dict[str, float]:
    lines = [json.loads(line) for line in (DEMO / "predictions" / "examples.jsonl").read_text().splitlines()]
    chosen = [row for name in THROUGHPUT_MODELS for row in lines if row["model_name_or_path"] == name]
    figures: dict[str, float] = {"predictions": len(chosen)}
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        preds = Path(tmp) / "preds.jsonl"
        preds.write_text("".join(json.dumps(row) + "\n" for row in chosen))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        for workers in (1, 2):
            argv = [sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(preds), "--dataset", str(dataset),
                    "--run-id", f"w{workers}", "--output-dir", tmp, "--max-workers", str(workers),
                    "--timeout", str(timeout), "--probe-timeout", str(probe_timeout)]
            started = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                raise RuntimeError(f"evaluate.py exited {done.returncode}: {done.stderr[-2000:]}")
            figures[f"workers_{workers}_s"] = seconds
            figures[f"workers_{workers}_per_minute"] = len(chosen) / seconds * 60
    return figures


def table(results: dict[str, Any], command: str) -> str:
    o, p, t = results["overhead"], results["probe_phase"], results["throughput"]
    rows = [
        ("bare evaluator (`docker exec` in a running container)", f"{o['bare_evaluator_s']:.2f} s", "1.00x"),
        ("full evaluation, probes off", f"{o['full_evaluation_probes_off_s']:.2f} s",
         f"{o['full_evaluation_probes_off_s'] / o['bare_evaluator_s']:.2f}x"),
        ("full evaluation, probes on", f"{o['full_evaluation_probes_on_s']:.2f} s",
         f"{o['full_evaluation_probes_on_s'] / o['bare_evaluator_s']:.2f}x"),
        (f"probes, per selector ({p['selectors']} pytest processes, upstream)", f"{p['per_selector_probes_s']:.2f} s",
         "1.00x"),
        ("probes, batched (`Workbench.probe`: fresh isolated container; same statuses)", f"{p['batched_probes_s']:.2f} s",
         f"{p['per_selector_probes_s'] / p['batched_probes_s']:.1f}x faster"),
        (f"evaluate.py, {t['predictions']} predictions, --max-workers 1", f"{t['workers_1_s']:.1f} s",
         f"{t['workers_1_per_minute']:.1f} pred/min"),
        (f"evaluate.py, {t['predictions']} predictions, --max-workers 2", f"{t['workers_2_s']:.1f} s",
         f"{t['workers_2_per_minute']:.1f} pred/min ({t['workers_2_per_minute'] / t['workers_1_per_minute']:.2f}x)"),
    ]
    lines = [f"`{command}` ({results['repeats']} repeats, median; {os.cpu_count()} CPUs)", "",
             "| measure | time | ratio |", "|---|---|---|"]
    return "\n".join(lines + [f"| {a} | {b} | {c} |" for a, b, c in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=None, help="the demo dataset folder (built when omitted)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per timing; the median is reported")
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--probe-timeout", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-dataset-") as tmp:
        dataset = args.dataset or demo_dataset(Path(tmp))
        spec, client = demo_spec(dataset), docker_client()
        results = {"repeats": args.repeats,
                   "overhead": overhead(client, spec, args.repeats, args.timeout, args.probe_timeout),
                   "probe_phase": probe_phase(client, spec, args.repeats, args.probe_timeout),
                   "throughput": throughput(dataset, args.timeout, args.probe_timeout)}
    print(table(results, "python scripts/bench_harness.py " + " ".join(argv if argv is not None else sys.argv[1:])))
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
