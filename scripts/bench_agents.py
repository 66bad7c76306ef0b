"""The agent runner's figures on the demo task, with the scripted model server (no model's own time in them).

    python scripts/bench_agents.py                                    # the demo task (built if needed)
    python scripts/bench_agents.py --dataset build/demo/dataset --steps 20 --rounds 2 --json bench.json

(a) Overhead per agent step: a single agent that runs `true` --steps times, then submits, for each adapter. A step
is the time from one model response to the next, as the agent's trajectory stamps them: the command in the
container, the recording, and the next model call. The model call itself is timed from the client side: for
mini-swe-agent, its own model object (litellm) asking the same scripted server the same first prompt here, --steps
times; for shell-cli, the relay's call to the server as the relay recorded it (`model_seconds`). Reported as
medians, the overhead (step - call) and the ratio step / call.

(b) End to end: scripts/run_agents.py on every demo scenario of the implemented protocols with scripts that reach
the gold solution (one worker, so scenarios never overlap), for each adapter: each scenario's own wall time
(`usage.runtime_seconds`: containers, agents, merges), median over --rounds, and the whole command's.

Adapters alternate round by round, so a change of the machine's load hits both alike. Printed as Markdown tables;
--json writes the raw timings too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

AGENTS = ("mini-swe-agent", "shell-cli")
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
TASK = "asyncodebench-demo:minicache"


def demo_dataset(out: Path) -> Path:
    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.images.demo import DEMO_TASK_YAML, build
    from asyncodebench.images.registry import registry_port_from_env

    image = build(registry_port_from_env())
    write_rows(build_task_rows(DEMO_TASK_YAML, ROOT / "data" / "protocols.yaml", digest=image.digest), out)
    return out


def apply(name: str) -> str:
    patch = (ROOT / "data" / "demo" / "patches" / f"{name}.patch").read_text()
    return (f"cat > /tmp/change.patch <<'PATCH_END'\n{patch}PATCH_END\n"
            "git apply /tmp/change.patch && rm /tmp/change.patch")


def run_agents(agent: str, scripts: dict[str, Any], dataset: Path, out: Path, run_id: str,
               *flags: str) -> tuple[float, list[dict[str, Any]]]:
    """Wall seconds of one run_agents.py command and its predictions."""
    path = out / f"{run_id}.json"
    path.write_text(json.dumps(scripts))
    command = [sys.executable, str(ROOT / "scripts" / "run_agents.py"), "--agent", agent, "--model", "scripted",
               "--scripts", str(path), "--dataset", str(dataset), "--output-dir", str(out), "--run-id", run_id,
               "--max-workers", "1", *flags]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"error: {run_id} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    predictions = out / run_id / "predictions.jsonl"
    return seconds, [json.loads(line) for line in predictions.read_text().splitlines() if line.strip()]


def stamp(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["time"]).timestamp()


def step_seconds(run_dir: Path, prediction: dict[str, Any]) -> tuple[list[float], list[float], list[dict[str, Any]]]:
    """Seconds between consecutive model responses, the relay's call times, and the trajectory's prompts."""
    from asyncodebench.agents.trajectory import read_trajectory

    (agent,) = prediction["runner"]["agents"]
    lines = read_trajectory(run_dir / agent["trajectory"])
    responses = [line for line in lines if line["type"] == "response"]
    steps = [stamp(b) - stamp(a) for a, b in zip(responses, responses[1:])]
    prompts = [{"role": line["role"], "content": line["content"]} for line in lines if line["type"] == "message"][:2]
    return steps, [line["model_seconds"] for line in responses if "model_seconds" in line], prompts


def client_calls(prompts: list[dict[str, Any]], count: int) -> list[float]:
    """Seconds of mini-swe-agent's own model object asking the scripted server `prompts`, `count` times."""
    from asyncodebench.agents.adapter import ModelEndpoint
    from asyncodebench.agents.miniswe import endpoint_model
    from asyncodebench.agents.scripted_server import ScriptedServer, parse_scripts

    with ScriptedServer(parse_scripts({"probe": ["true"] * (count + 1)})) as server:
        model = endpoint_model(ModelEndpoint("scripted/probe", server.base_url, None))
        model.query(prompts)  # the first call pays the client's set-up
        times = []
        for _ in range(count):
            started = time.perf_counter()
            model.query(prompts)
            times.append(time.perf_counter() - started)
    return times


def overhead(dataset: Path, out: Path, steps: int, rounds: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    timed: dict[str, tuple[list[float], list[float]]] = {agent: ([], []) for agent in AGENTS}
    for round_ in range(rounds):  # the adapters alternate, so a change of the machine's load hits both alike
        for agent in AGENTS:
            all_steps, calls = timed[agent]
            run_id = f"steps-{agent}-{round_}"
            _, (prediction,) = run_agents(agent, {"single_agent": ["true"] * steps + [SUBMIT]}, dataset, out, run_id,
                                          "--scenarios", f"{TASK}/single")
            step, relay_calls, prompts = step_seconds(out / run_id, prediction)
            all_steps += step
            calls += relay_calls if agent == "shell-cli" else client_calls(prompts, steps)
    for agent, (all_steps, calls) in timed.items():
        step_median, call_median = statistics.median(all_steps), statistics.median(calls)
        results[agent] = {"steps": all_steps, "calls": calls, "step_median": step_median, "call_median": call_median,
                          "overhead_median": step_median - call_median, "ratio": step_median / call_median}
    return results


def end_to_end(dataset: Path, out: Path, rounds: int) -> dict[str, Any]:
    from asyncodebench.agents.protocols import IMPLEMENTED

    scripts = {f"{TASK}/single/single_agent": [apply("gold"), SUBMIT],
               "core_agent": [apply("producer_only"), SUBMIT], "api_agent": [apply("consumer_only"), SUBMIT]}
    results: dict[str, Any] = {"protocols": list(IMPLEMENTED)}
    for agent in AGENTS:
        results[agent] = {"scenarios": {p: [] for p in IMPLEMENTED}, "commands": []}
    for round_ in range(rounds):
        for agent in AGENTS:
            per, commands = results[agent]["scenarios"], results[agent]["commands"]
            seconds, lines = run_agents(agent, scripts, dataset, out, f"e2e-{agent}-{round_}", "--scenarios",
                                        f"{TASK}/*")
            commands.append(seconds)
            for line in lines:
                if line["model_patch"].strip() != (ROOT / "data/demo/patches/gold.patch").read_text().strip():
                    raise SystemExit(f"error: {agent} did not reach the gold solution under {line['protocol']}")
                per[line["protocol"]].append(line["usage"]["runtime_seconds"])
    return results


def tables(steps: dict[str, Any], e2e: dict[str, Any], step_count: int, rounds: int) -> str:
    rows = ["| agent | step (median s) | model call, client side (median s) | overhead per step (s) | step / call |",
            "|---|---:|---:|---:|---:|"]
    for agent in AGENTS:
        r = steps[agent]
        rows.append(f"| {agent} | {r['step_median']:.3f} | {r['call_median']:.4f} | {r['overhead_median']:.3f} | "
                    f"{r['ratio']:.0f}x |")
    rows += ["", f"({len(steps[AGENTS[0]]['steps'])} steps per agent: {step_count} per run x {rounds} round(s).)", "",
             "| protocol | " + " | ".join(f"{a} (median s)" for a in AGENTS) + " |",
             "|---|" + "---:|" * len(AGENTS)]
    for protocol in e2e["protocols"]:
        cells = [f"{statistics.median(e2e[a]['scenarios'][protocol]):.1f}" for a in AGENTS]
        rows.append(f"| {protocol} | " + " | ".join(cells) + " |")
    rows.append("| whole command (all of the above) | " + " | ".join(
        f"{statistics.median(e2e[a]['commands']):.1f}" for a in AGENTS) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=None, help="published demo folder (default: built here)")
    parser.add_argument("--steps", type=int, default=10, help="agent steps per overhead run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the raw timings here")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="acb-bench-agents-", dir="/tmp"))
    dataset = args.dataset or demo_dataset(out / "dataset")
    steps = overhead(dataset, out, args.steps, args.rounds)
    e2e = end_to_end(dataset, out, args.rounds)
    print(tables(steps, e2e, args.steps, args.rounds))
    if args.json:
        args.json.write_text(json.dumps({"overhead": steps, "end_to_end": e2e}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
