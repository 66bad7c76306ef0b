"""What the grading isolation costs per prediction: this checkout against an earlier revision, runs alternated.

    python scripts/bench_isolation.py --against e8c4ab8 --dataset build/demo/dataset --rounds 7

Each round times one full evaluation of the demo's gold patch (`evaluate_patch`: containers, preparation,
evaluator, probes on and off) with the earlier revision's package, then with this checkout's, each in a fresh
interpreter, so the machine's load hits both sides alike. Prints the medians and their ratio (this / earlier).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLD = ROOT / "data" / "demo" / "patches" / "gold.patch"

# The same call in both revisions: evaluate_patch(client, spec, patch, run_id, settings, overlays).
ONE_ROUND = r"""
import json, sys, time
from asyncodebench.harness.evaluation import Settings, evaluate_patch
from asyncodebench.dataset.rows import load_published
from asyncodebench.harness.sandbox import docker_client, remove_run_containers
from asyncodebench.harness.spec import TaskSpec
rows = load_published(sys.argv[1]).rows
spec = TaskSpec.from_rows(rows.tasks[0], rows.dependencies)
client, patch, times = docker_client(), open(sys.argv[2], "rb").read(), {}
for probes in (False, True):
    started = time.perf_counter()
    evaluate_patch(client, spec, patch, "bench-isolation", Settings(60, 30, probes), {})
    times["probes_on" if probes else "probes_off"] = time.perf_counter() - started
remove_run_containers(client, "bench-isolation")
print(json.dumps(times))
"""


def one_round(package_root: Path, dataset: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", ONE_ROUND, str(dataset), str(GOLD)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(package_root), "PATH": "/usr/local/bin:/usr/bin:/bin"}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the round with {package_root} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="the earlier git revision to compare with")
    parser.add_argument("--dataset", type=Path, required=True, help="the demo dataset folder (scripts/prepare_demo.py)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as tmp:
        earlier = Path(tmp) / "earlier"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(earlier), args.against],
                       check=True)
        try:
            runs: dict[str, list[dict[str, float]]] = {"earlier": [], "this": []}
            for _ in range(args.rounds):
                runs["earlier"].append(one_round(earlier, args.dataset.resolve()))
                runs["this"].append(one_round(ROOT, args.dataset.resolve()))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(earlier)], check=False)
    print(f"`python scripts/bench_isolation.py --against {args.against} --rounds {args.rounds}` "
          f"(median of {args.rounds} alternated rounds)\n")
    print("| evaluation of the gold patch | earlier | this checkout | ratio |\n|---|---|---|---|")
    for key in ("probes_off", "probes_on"):
        before = statistics.median(r[key] for r in runs["earlier"])
        after = statistics.median(r[key] for r in runs["this"])
        print(f"| {key.replace('_', ' ')} | {before:.2f} s | {after:.2f} s | {after / before:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
