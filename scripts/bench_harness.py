"""Measure what the evaluation harness costs on a task and a patch, against the bare evaluator.

    python scripts/bench_harness.py                      # the demo task and its gold patch (built if needed)
    python scripts/bench_harness.py --dataset build/demo-dataset --repeats 5 --json
    python scripts/bench_harness.py --dataset ./published --task asyncodebench:cachetools --patch fix.diff

(a) overhead: wall time of one full evaluation (`evaluate_patch`: container start, preparation, evaluator, [probes],
    removal) divided by the bare evaluator command run with `docker exec` in an already running container of the
    same image, gold patch applied (median of --repeats);
(b) probe phase: the batched `run_probes` against one pytest process per selector (the upstream method, reference
    in tests/helpers/per_selector_probes.py); the statuses are asserted equal;
(c) throughput (demo task only): predictions per minute of scripts/evaluate.py on 12 demo predictions,
    --max-workers 1 and 2.
The bare evaluator runs as the harness runs it (in the work tree, with PYTHONPATH=<work tree>/src:<work tree>, on
the base state with the task's overlays and the patch applied). Prints a Markdown table (and JSON with --json).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's package, and the per-selector reference

from helpers.per_selector_probes import ReferenceBox  # noqa: E402

from asyncodebench.dataset.rows import load_published  # noqa: E402
from asyncodebench.harness.evaluation import Settings, Workbench, evaluate_patch  # noqa: E402
from asyncodebench.harness.overlays import OverlayError, OverlaySource  # noqa: E402
from asyncodebench.harness.probes import selector_results  # noqa: E402
from asyncodebench.harness.sandbox import docker_client, remove_run_containers  # noqa: E402
from asyncodebench.harness.spec import TaskSpec  # noqa: E402

DEMO = ROOT / "data" / "demo"
DEMO_GOLD = DEMO / "patches" / "gold.patch"
DEMO_TASK = "asyncodebench-demo:minicache"
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
    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.images.demo import DEMO_TASK_YAML, build
    from asyncodebench.images.registry import registry_port_from_env

    image = build(registry_port_from_env())
    write_rows(build_task_rows(DEMO_TASK_YAML, ROOT / "data" / "protocols.yaml", digest=image.digest), out)
    return out


def task_spec(dataset: Path, task_id: str) -> TaskSpec:
    rows = load_published(str(dataset)).rows
    tasks = {t["task_id"]: t for t in rows.tasks}
    if task_id not in tasks:
        raise SystemExit(f"error: the dataset {dataset} has no task {task_id!r}; it has {sorted(tasks)}")
    return TaskSpec.from_rows(tasks[task_id], rows.dependencies)


@dataclass(frozen=True)
class Subject:
    """What is measured: a task, the patch to evaluate and the task's overlays."""

    spec: TaskSpec
    patch: bytes
    overlays: dict[str, bytes]


def patched_box(client: Any, subject: Subject) -> ReferenceBox:
    """A plain running container of the image on the base state with overlays and the patch applied."""
    box = ReferenceBox(client, subject.spec)
    box.set_state(b"".join(subject.overlays[path] for path, _ in subject.spec.overlays) + subject.patch)
    return box


def overhead(client: Any, subject: Subject, repeats: int, timeout: int, probe_timeout: int) -> dict[str, float]:
    spec = subject.spec
    with patched_box(client, subject) as box:
        work = shlex.quote(spec.workdir)
        bare_command = shlex.join([spec.interpreter, "-m", "pytest", *spec.pytest_options, *spec.test_targets])
        script = f'cd {work} && PYTHONPATH={work}/src:{work}:"${{PYTHONPATH:-}}" {bare_command} >/dev/null 2>&1'
        argv = ["docker", "exec", box.container.name, "sh", "-c", script]
        bare = median_seconds(lambda: subprocess.run(argv, check=False), repeats)
    figures = {"bare_evaluator_s": bare}
    try:
        for probes in (False, True):
            settings = Settings(timeout, probe_timeout, probes)
            key = f"full_evaluation_probes_{'on' if probes else 'off'}_s"
            figures[key] = median_seconds(
                lambda: evaluate_patch(client, spec, subject.patch, "bench", settings, subject.overlays), repeats)
    finally:
        remove_run_containers(client, "bench")
    return figures


def probe_phase(client: Any, subject: Subject, repeats: int, probe_timeout: int) -> dict[str, float]:
    spec = subject.spec
    batched = per_selector = {}
    bench = Workbench.open(client, spec, "bench", Settings(probe_timeout=probe_timeout), subject.overlays)

    def ours() -> None:
        nonlocal batched
        _, run = bench.probe(subject.patch)
        batched = {s: r.status for s, r in selector_results(run, spec.selectors).items()}

    with patched_box(client, subject) as box:
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
    o, p, t = results["overhead"], results["probe_phase"], results.get("throughput")
    rows = [
        ("bare evaluator (`docker exec` in a running container)", f"{o['bare_evaluator_s']:.2f} s", "1.00x"),
        ("full evaluation, probes off", f"{o['full_evaluation_probes_off_s']:.2f} s",
         f"{o['full_evaluation_probes_off_s'] / o['bare_evaluator_s']:.2f}x"),
        ("full evaluation, probes on", f"{o['full_evaluation_probes_on_s']:.2f} s",
         f"{o['full_evaluation_probes_on_s'] / o['bare_evaluator_s']:.2f}x"),
        (f"probes, per selector ({p['selectors']} pytest processes, upstream)", f"{p['per_selector_probes_s']:.2f} s",
         "1.00x"),
        ("probes, batched (`Workbench.probe`: fresh isolated container; same statuses)",
         f"{p['batched_probes_s']:.2f} s",
         f"{p['per_selector_probes_s'] / p['batched_probes_s']:.1f}x faster"),
    ]
    if t:
        rows += [
            (f"evaluate.py, {t['predictions']} predictions, --max-workers 1", f"{t['workers_1_s']:.1f} s",
             f"{t['workers_1_per_minute']:.1f} pred/min"),
            (f"evaluate.py, {t['predictions']} predictions, --max-workers 2", f"{t['workers_2_s']:.1f} s",
             f"{t['workers_2_per_minute']:.1f} pred/min "
             f"({t['workers_2_per_minute'] / t['workers_1_per_minute']:.2f}x)"),
        ]
    lines = [f"`{command}` ({results['task']}; {results['repeats']} repeats, median; {os.cpu_count()} CPUs)", "",
             "| measure | time | ratio |", "|---|---|---|"]
    return "\n".join(lines + [f"| {a} | {b} | {c} |" for a, b, c in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=None,
                        help="a published dataset folder (default: the demo's, built when omitted)")
    parser.add_argument("--task", default=DEMO_TASK, help=f"the task to measure (default: {DEMO_TASK})")
    parser.add_argument("--patch", type=Path, default=None,
                        help="the patch to evaluate (default: the demo's gold patch; required for other tasks)")
    parser.add_argument("--overlays-dir", type=Path, default=None,
                        help="a checkout of the upstream repository holding the task's overlays (else fetched)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per timing; the median is reported")
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--probe-timeout", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    if args.patch is None and args.task != DEMO_TASK:
        parser.error(f"--patch is required for {args.task} (the demo's gold patch only fits the demo)")
    with tempfile.TemporaryDirectory(prefix="bench-dataset-") as tmp:
        dataset = args.dataset or demo_dataset(Path(tmp))
        spec, client = task_spec(dataset, args.task), docker_client()
        try:
            overlays = OverlaySource(directory=args.overlays_dir).load(spec.overlays)
        except OverlayError as exc:
            parser.exit(3, f"error: {exc}\n")
        subject = Subject(spec, (args.patch or DEMO_GOLD).read_bytes(), overlays)
        results = {"task": args.task, "repeats": args.repeats,
                   "overhead": overhead(client, subject, args.repeats, args.timeout, args.probe_timeout),
                   "probe_phase": probe_phase(client, subject, args.repeats, args.probe_timeout)}
        if args.task == DEMO_TASK:
            results["throughput"] = throughput(dataset, args.timeout, args.probe_timeout)
    print(table(results, "python scripts/bench_harness.py " + " ".join(argv if argv is not None else sys.argv[1:])))
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
