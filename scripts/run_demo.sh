#!/usr/bin/env bash
# The main job on the embedded default: set up this machine, build the demo task's image (pushed to a registry on
# 127.0.0.1 and pinned by digest), then score the example predictions of both demo tasks (gold, empty, partial, broken, hostile,
# multi-agent and checkpoint replays) in sandboxed containers and print the summary table.
# Extra arguments go to scripts/evaluate.py (e.g. --max-workers 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup_machine.sh
out="${ASYNCODEBENCH_DEMO_DIR:-build/demo}"
.venv/bin/python scripts/prepare_demo.py "$out/dataset" >/dev/null
cat data/demo/predictions/*.jsonl data/demo-native/predictions/*.jsonl > "$out/predictions.jsonl"
.venv/bin/python scripts/evaluate.py "$out/predictions.jsonl" --dataset "$out/dataset" --run-id demo \
    --output-dir "$out/runs" --timeout 60 --probe-timeout 10 --build-timeout 60 --max-workers 2 "$@"
