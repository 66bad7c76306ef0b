"""Replay cost: N checkpoint states probed in one container against N fresh containers (demo task).

    python scripts/bench_replay.py --dataset build/demo/dataset [--states 5] [--repeat 3]

Prints the median wall time of both ways and their ratio. Needs the Docker Engine and the demo dataset
(`python scripts/prepare_demo.py build/demo/dataset`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from asyncodebench.evaluation import Settings, State, copy_inputs, probe_state
from asyncodebench.rows import load_published
from asyncodebench.sandbox import Sandbox, docker_client
from asyncodebench.spec import TaskSpec

PATCHES = Path(__file__).resolve().parent.parent / "data" / "demo" / "patches"


def states(n: int) -> list[State]:
    """Alternate producer-only and gold states, as a two-agent run would produce."""
    patches = [(PATCHES / "producer_only.patch").read_bytes(), (PATCHES / "gold.patch").read_bytes()]
    return [State("integration_after_merge", "integrated_workspace", None, patches[i % 2]) for i in range(n)]


def one_container(client, spec: TaskSpec, replay: list[State], settings: Settings) -> float:
    started = time.perf_counter()
    with Sandbox(client, spec.pinned_ref, "bench-replay", settings.limits, spec.workdir) as box:
        copy_inputs(box, spec, {})
        for state in replay:
            probe_state(box, spec, state, settings)
    return time.perf_counter() - started


def fresh_containers(client, spec: TaskSpec, replay: list[State], settings: Settings) -> float:
    started = time.perf_counter()
    for state in replay:
        with Sandbox(client, spec.pinned_ref, "bench-replay", settings.limits, spec.workdir) as box:
            copy_inputs(box, spec, {})
            probe_state(box, spec, state, settings)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="build/demo/dataset")
    parser.add_argument("--states", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = load_published(args.dataset, None).rows
    spec = TaskSpec.from_rows(rows.tasks[0], rows.dependencies)
    client, settings, replay = docker_client(), Settings(), states(args.states)
    shared = [one_container(client, spec, replay, settings) for _ in range(args.repeat)]
    fresh = [fresh_containers(client, spec, replay, settings) for _ in range(args.repeat)]
    a, b = statistics.median(shared), statistics.median(fresh)
    print(f"| replay of {args.states} checkpoints ({spec.task_id}) | median s | per state s |")
    print("|---|---:|---:|")
    print(f"| one container, reset between states | {a:.2f} | {a / args.states:.2f} |")
    print(f"| a fresh container per state | {b:.2f} | {b / args.states:.2f} |")
    print(f"| ratio fresh / one container | {b / a:.2f}x | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
