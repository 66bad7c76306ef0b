"""Measure what rebuilding native code before evaluation costs (METRICS decision 13), on the native demo task.

    python scripts/bench_native.py [--repeats 5] [--json]

On the vecstats demo (image built and pushed to the local registry if needed), for its gold patch (1 state) and its
serial two-agent prediction (5 states: each agent's artifact, the integrated state after each merge, the final):
(a) the whole prediction's wall time, two ways: with the task's build, and with the build command replaced by one
    that does nothing (the same prediction with no native code compiled: the build's container and copy-on-write
    tree remain, the tests meet the base's library); medians of --repeats, and their ratio. (Taking the build step
    away altogether is no comparison: the tests then miss the library and take another path.);
(b) builds per prediction (must equal its number of states) and each build's own time, from the result;
(c) per state: the build stage's wall time (copy-on-write tree, container, preparation, build, removal) against
    the build command's own, what the build wrote over the image's build tree (the tmpfs upper layer, `du`) and the
    build container's peak memory (cgroup v1 `memory.max_usage_in_bytes`, read before it is removed).
Prints Markdown tables (JSON too with --json). Probes are on, as in a real run; limits are the official defaults.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from asyncodebench.harness.build_tree import UPPER_MOUNT, StateBuildTree  # noqa: E402
from asyncodebench.harness.evaluation import Settings, Workbench, evaluate_patch, new_run_id  # noqa: E402
from asyncodebench.harness.native import run_build  # noqa: E402
from asyncodebench.harness.sandbox import docker_client, remove_run_containers  # noqa: E402
from asyncodebench.harness.spec import TaskSpec  # noqa: E402
from asyncodebench.images.demo import NATIVE_DEMO, build  # noqa: E402
from asyncodebench.images.registry import registry_port_from_env  # noqa: E402

# dataset.build and run.* are imported where used: they load jsonschema, which --help does not need.

CGROUP_MEMORY = Path("/sys/fs/cgroup/memory/docker")


def native_spec() -> TaskSpec:
    from asyncodebench.dataset.build import build_task_rows

    image = build(registry_port_from_env(), task=NATIVE_DEMO)
    rows = build_task_rows(NATIVE_DEMO.task_yaml, ROOT / "data" / "protocols.yaml", digest=image.digest)
    return TaskSpec.from_rows(rows.tasks[0], rows.dependencies)


def predictions(spec: TaskSpec) -> dict[str, Any]:
    from asyncodebench.run.predictions import read_predictions

    folder = NATIVE_DEMO.folder / "predictions"
    known = {spec.task_id: {a.agent_id for a in spec.specialists}}
    found = {}
    for name, model, protocol in (("examples.jsonl", "demo-native-gold", "single"),
                                  ("multiagent.jsonl", "demo-native-multi-clean", "serial_specialists")):
        found.update({f"{model} ({protocol})": p for p in read_predictions(folder / name, known, None).predictions
                      if p.model == model and p.protocol == protocol})
    return found


def evaluate(client: Any, spec: TaskSpec, prediction: Any) -> tuple[float, dict[str, Any] | None]:
    """One whole evaluation of the prediction; (seconds, the result's build record)."""
    from asyncodebench.run.results import score
    from asyncodebench.run.work import work_of

    patch, states, agents = work_of(spec, prediction)
    run_id = new_run_id()
    started = time.perf_counter()
    try:
        evidence = evaluate_patch(client, spec, patch, run_id, Settings(), {}, states, agents)
    finally:
        remove_run_containers(client, run_id)
    seconds = time.perf_counter() - started
    result = score(spec, prediction, evidence)
    assert result.evaluation is not None
    return seconds, result.evaluation.build.to_json() if result.evaluation.build else None


def state_footprint(client: Any, spec: TaskSpec, patch: bytes) -> dict[str, Any]:
    """One state's build, measured: seconds, bytes written over the image's tree, the container's peak memory."""
    assert spec.build is not None
    run_id = new_run_id()
    bench = Workbench.open(client, spec, run_id, Settings(), {})
    started = time.perf_counter()
    try:
        with StateBuildTree(client, spec.pinned_ref, run_id, bench.base, spec.build.build_dir,
                            Settings().limits.build_space) as tree:
            with bench.prepared(patch, (tree.volume, spec.build.build_dir, False), for_build=True) as (box, _):
                run = run_build(box, spec.interpreter, spec.build.command, spec.build.timeout_seconds)
                peak = CGROUP_MEMORY / box.container.id / "memory.max_usage_in_bytes"
                memory = int(peak.read_text()) if peak.exists() else None
            used = tree.holder.exec_run(["du", "-sk", f"{UPPER_MOUNT}/upper"]).output.decode().split()[0]
        stage = time.perf_counter() - started
        return {"status": run.status, "seconds": run.seconds, "stage_seconds": round(stage, 2),
                "written_kib": int(used),
                "build_container_peak_mib": None if memory is None else round(memory / 2**20, 1)}
    finally:
        remove_run_containers(client, run_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    client, spec = docker_client(), native_spec()
    assert spec.build is not None
    variants = {"build": spec, "no-op build": replace(spec, build=replace(spec.build, command=("true",)))}
    rows, builds = [], {}
    for name, prediction in predictions(spec).items():
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.repeats):  # interleaved, so drift in the machine's load falls on every variant
            for variant, variant_spec in variants.items():
                seconds, record = evaluate(client, variant_spec, prediction)
                times[variant].append(seconds)
                if variant == "build":
                    builds[name] = record
        medians = {v: statistics.median(t) for v, t in times.items()}
        rows.append({"prediction": name, **{f"{v} s": round(m, 2) for v, m in medians.items()},
                     "build / no-op build": round(medians["build"] / medians["no-op build"], 2)})
    gold = (NATIVE_DEMO.folder / "patches" / "gold.patch").read_bytes()
    footprints = {"base (empty patch)": state_footprint(client, spec, b""), "gold": state_footprint(client, spec, gold)}
    print(f"## Whole prediction, median of {args.repeats} (seconds)\n")
    print("| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(str(v) for v in row.values()) + " |")
    print("\n## Builds per prediction (with the build)\n")
    print("| prediction | states built | seconds per state |\n|---|---|---|")
    for name, record in builds.items():
        assert record is not None
        print(f"| {name} | {record['states_built']} | {', '.join(str(s['seconds']) for s in record['states'])} |")
    print("\n## One state's build\n\n| state | status | build s | whole build stage s | written over the image's "
          "tree (KiB) | build container peak memory (MiB) |\n|---|---|---|---|---|---|")
    for state, measured in footprints.items():
        print(f"| {state} | {measured['status']} | {measured['seconds']} | {measured['stage_seconds']} | "
              f"{measured['written_kib']} | {measured['build_container_peak_mib']} |")
    if args.json:
        print(json.dumps({"predictions": rows, "builds": builds, "states": footprints}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
