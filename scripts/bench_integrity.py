r"""What the tampering checks cost per prediction: sentinels, audit hook and consistency checks on against off.

    python scripts/bench_integrity.py --dataset build/demo/dataset --rounds 9
    python scripts/bench_integrity.py --dataset . --task asyncodebench:cachetools \
        --images build/rebuilt-images.json --patch '' --rounds 9

Each round evaluates one prediction twice in this interpreter, in alternating order, so the machine's load hits both
sides alike: once as the harness does (the launcher adds the sentinel tests and the audit hook, scoring checks the
evidence), once with the launcher given no sentinel secret (no sentinels, no audit hook; scoring then has nothing
to check). Each evaluation is the whole procedure: fresh containers, preparation, the evaluator and the probes, and
grading. Prints the medians and their ratio (on / off). `--patch ''` evaluates the base state (no reference
solution is needed for a task's rebuilt image); the default is the demo's gold patch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
GOLD = ROOT / "data" / "demo" / "patches" / "gold.patch"


def evaluation(dataset: str, task_id: str | None, images: Path | None, patch: bytes) -> Callable[[], float]:
    """One whole evaluation and grading of `patch`, timed."""
    from asyncodebench.dataset.rows import load_published
    from asyncodebench.harness.evaluation import Settings, evaluate_patch
    from asyncodebench.harness.sandbox import docker_client
    from asyncodebench.harness.spec import TaskSpec
    from asyncodebench.images import image_map
    from asyncodebench.run.predictions import Prediction
    from asyncodebench.run.results import score

    rows = load_published(dataset).rows
    task = next(t for t in rows.tasks if task_id in (None, t["task_id"]))
    spec = TaskSpec.from_rows(task, rows.dependencies)
    if images is not None:
        spec = image_map.apply({spec.task_id: spec}, image_map.load(images), images)[spec.task_id]
    client = docker_client()
    prediction = Prediction(1, spec.task_id, "single", "bench", None, patch.decode("utf-8", "surrogateescape"), (), {},
                            {})

    def once() -> float:
        started = time.perf_counter()
        evidence = evaluate_patch(client, spec, patch, "bench-integrity", Settings(900, 60, True), {})
        score(spec, prediction, evidence)
        return time.perf_counter() - started
    return once


def without_sentinels(workspace: Any) -> Callable[[], None]:
    """Make the launcher's configuration carry no sentinel secret; returns the undo."""
    original = workspace.launch_config
    workspace.launch_config = lambda workdir, plugins, pythonpath, sentinel: original(workdir, plugins, pythonpath,
                                                                                     None)
    return lambda: setattr(workspace, "launch_config", original)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="a published dataset folder (the demo's, or `.`)")
    parser.add_argument("--task", default=None, help="task id (default: the dataset's first task)")
    parser.add_argument("--images", type=Path, default=None, help="an image map (scripts/build_task_image.py)")
    parser.add_argument("--patch", default=str(GOLD), help="patch file to evaluate; '' for the base state")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    from asyncodebench.harness import workspace
    from asyncodebench.harness.sandbox import docker_client, remove_run_containers

    once = evaluation(args.dataset, args.task, args.images, Path(args.patch).read_bytes() if args.patch else b"")
    times: dict[str, list[float]] = {"on": [], "off": []}
    once()  # warm: the base volume, the image's pages
    for round_number in range(args.rounds):
        for side in (("on", "off") if round_number % 2 == 0 else ("off", "on")):
            undo = without_sentinels(workspace) if side == "off" else (lambda: None)
            try:
                times[side].append(once())
            finally:
                undo()
        print(f"round {round_number + 1}/{args.rounds}: on {times['on'][-1]:.2f} s, off {times['off'][-1]:.2f} s",
              file=sys.stderr)
    remove_run_containers(docker_client(), "bench-integrity")
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print("| evaluation (probes on) | checks off | checks on | ratio |\n|---|---|---|---|")
    print(f"| {args.task or 'first task'}, {'patch ' + Path(args.patch).name if args.patch else 'base state'} "
          f"| {off:.2f} s | {on:.2f} s | {on / off:.3f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
