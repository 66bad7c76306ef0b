"""scripts/run_agents.py --agent shell-cli end to end on the demo task: the example command-line agent runs inside
real task containers (no network), its model calls relayed by the host to the scripted model server; then
evaluate.py scores its predictions.

One module fixture makes two runs with a fake key in run_agents.py's environment (the relay sends it upstream,
tests/test_agent_relay.py shows that) and a host HTTP server on 127.0.0.1 that counts what reaches it:
- `cli-gold`: single (which first tries the network, the host's server and a search for the key) and async_private
  reach the gold solution, and so does async_manager, whose consumer acts only once the manager's hand-off of the
  producer's work reached it through the relay;
- `cli-budget` (`--budget 3`): a single agent that never submits.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers.agent_runs import line
from helpers.agent_scripts import DEMO_TASK, SUBMIT, apply, demo_patch, manager_reply, waiting, write_scripts
from helpers.checkout import ROOT, SCRIPTS, script_env
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import SCORING_FLAGS, EvalRun

from asyncodebench.agents.trajectory import read_trajectory
from asyncodebench.dataset.validation import validator

pytestmark = pytest.mark.docker

FAKE_KEY = f"sk-fake-{secrets.token_hex(12)}"
# Built at run time, so the command holds no "sk-fake-" for the search to find in its own process.
KEY_SEARCH = ("P=sk-fa''ke-; grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev \"$P\" / 2>/dev/null"
              " | head -5; for f in /proc/[0-9]*/environ; do cat $f 2>/dev/null | tr '\\0' '\\n'; done | "
              "grep -c \"$P\"; echo key-search-done")


def probes(host_port: int) -> list[str]:
    return [
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"; echo public-exit=$?",
        f"python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{host_port}/', timeout=3)\";"
        " echo host-exit=$?",
        KEY_SEARCH,
    ]


class Counter(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        Counter.hits += 1
        self.send_response(200)
        self.end_headers()


def run_cli_agents(scripts: Path, dataset: Path, out: Path, run_id: str, *flags: str) -> Any:
    return subprocess.run([sys.executable, str(SCRIPTS / "run_agents.py"), "--agent", "shell-cli", "--model",
                           "scripted", "--scripts", str(scripts), "--dataset", str(dataset), "--output-dir", str(out),
                           "--run-id", run_id, *flags], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=script_env({"OPENAI_API_KEY": FAKE_KEY}))


@pytest.fixture(scope="module")
def cli_runs(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("cli-runs")
    host = ThreadingHTTPServer(("127.0.0.1", 0), Counter)
    threading.Thread(target=host.serve_forever, daemon=True).start()
    runs: dict[str, Any] = {
        "cli-gold": ({f"{DEMO_TASK}/single/single_agent": [*probes(host.server_address[1]),
                                                            apply(demo_patch("gold")), SUBMIT],
                      "core_agent": [apply(demo_patch("producer_only")), SUBMIT],
                      "api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
                      # the online manager hands the producer's diff to the consumer, which waits for it
                      f"{DEMO_TASK}/async_manager/manager": [
                          manager_reply(), manager_reply({"type": "handoff", "from": "core_agent", "to": "api_agent"}),
                          manager_reply()],
                      f"{DEMO_TASK}/async_manager/api_agent": [
                          waiting("core_agent finished", apply(demo_patch("consumer_only"))), SUBMIT]},
                     ("--scenarios", "*/single,*/async_private,*/async_manager")),
        "cli-budget": ({"single_agent": ["ls"] * 6}, ("--scenarios", "*/single", "--budget", "3")),
    }
    lines = []
    try:
        for name, (scripts, flags) in runs.items():
            run_id = f"{name}-{secrets.token_hex(3)}"
            done = run_cli_agents(write_scripts(out / f"{name}.json", scripts), demo_dataset.path, out, run_id,
                                  "--name", name, *flags)
            assert done.returncode == 0, done.stderr[-3000:]
            predictions = out / run_id / "predictions.jsonl"
            runs[name] = {"dir": out / run_id, "containers_left": run_containers(run_id),
                          "lines": [json.loads(line) for line in predictions.read_text().splitlines()]}
            lines += predictions.read_text().splitlines()
    finally:
        host.shutdown()
        host.server_close()
    combined = out / "all.jsonl"
    combined.write_text("\n".join(lines) + "\n")
    evaluated = evaluate(combined, demo_dataset.path, *SCORING_FLAGS, run_id=f"cli-eval-{secrets.token_hex(3)}")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    return {"runs": runs, "eval": evaluated, "host_hits": Counter.hits}


def trajectory(runs: dict[str, Any], name: str, protocol: str, agent_id: str) -> list[dict[str, Any]]:
    (agent,) = [a for a in line(runs, name, protocol)["runner"]["agents"] if a["agent_id"] == agent_id]
    return read_trajectory(runs["runs"][name]["dir"] / agent["trajectory"])


def test_the_predictions_are_valid_and_name_the_agent(cli_runs: dict[str, Any]) -> None:
    check = validator("prediction")
    made = [p for run in cli_runs["runs"].values() for p in run["lines"]]
    assert len(made) == 4
    for prediction in made:
        assert list(check.iter_errors(prediction)) == []
        assert prediction["runner"]["agent"]["name"] == "shell-cli"
    assert all(run["containers_left"] == [] for run in cli_runs["runs"].values())


@pytest.mark.parametrize("protocol, checkpoints", [("single", 1), ("async_private", 5), ("async_manager", 5)])
def test_the_cli_agent_reaches_the_gold_solution(cli_runs: dict[str, Any], protocol: str, checkpoints: int) -> None:
    assert line(cli_runs, "cli-gold", protocol)["model_patch"] == demo_patch("gold")
    (row,) = [p for p in cli_runs["eval"].report["predictions"]
              if p["model_name_or_path"] == "cli-gold" and p["protocol"] == protocol]
    assert (row["final_success"], row["pass_rate"], row["checkpoint_count"]) == (True, 1.0, checkpoints)
    for agent in line(cli_runs, "cli-gold", protocol)["runner"]["agents"]:
        if agent["agent_id"] != "manager":  # the manager runs on the host, not as the CLI agent
            assert (agent["termination_reason"], agent["exit_status"]) == ("agent_finish", "exit 0")


def test_the_relay_records_each_exchange(cli_runs: dict[str, Any]) -> None:
    prediction = line(cli_runs, "cli-gold", "async_private")
    steps = trajectory(cli_runs, "cli-gold", "async_private", "core_agent")
    assert [s["type"] for s in steps] == ["message", "message", "response", "observation", "response", "exit",
                                          "summary"]
    assert steps[3]["command"].startswith("cat > /tmp/change.patch") and "<exit_code>0</exit_code>" in steps[3][
        "output"]
    assert prediction["usage"]["model_calls"] == 4
    assert sum(s.get("prompt_tokens", 0) for s in steps) == steps[-1]["usage"]["prompt_tokens"] > 0


def test_a_manager_message_reaches_the_running_cli_agent_through_the_relay(cli_runs: dict[str, Any]) -> None:
    prediction = line(cli_runs, "cli-gold", "async_manager")
    events = [(e["event"], e.get("agent_id")) for e in prediction["runner"]["events"]]
    assert ("message_delivered", "api_agent") in events and ("message_undelivered", "api_agent") not in events
    steps = trajectory(cli_runs, "cli-gold", "async_manager", "api_agent")
    (inbox,) = [i for i, s in enumerate(steps) if s["type"] == "inbox"]
    assert "minicache/core.py" in steps[inbox]["content"]
    # it waited (sleep 1) until then, and applied its part only after the message reached the model
    applied = [i for i, s in enumerate(steps) if s["type"] == "response" and any(
        "change.patch" in c for c in s["commands"])]
    assert applied and applied[0] > inbox
    assert all(s["commands"] == ["sleep 1"] for s in steps[:inbox] if s["type"] == "response")


def test_the_container_has_no_network(cli_runs: dict[str, Any]) -> None:
    outputs = [s["output"] for s in trajectory(cli_runs, "cli-gold", "single", "single_agent")
               if s["type"] == "observation"]
    assert "public-exit=1" in outputs[0] and "host-exit=1" in outputs[1]
    assert cli_runs["host_hits"] == 0


def test_the_key_reaches_neither_the_container_nor_any_record(cli_runs: dict[str, Any]) -> None:
    search = [s["output"] for s in trajectory(cli_runs, "cli-gold", "single", "single_agent")
              if s["type"] == "observation"][2]
    # No file of the container holds the key, no process has it in its environment (count 0).
    assert search == "<exit_code>0</exit_code>\n<output>\n0\nkey-search-done\n</output>"
    for run in cli_runs["runs"].values():
        for path in run["dir"].rglob("*"):
            assert not path.is_file() or FAKE_KEY.encode() not in path.read_bytes(), path


def test_the_relay_stops_an_agent_at_its_budget(cli_runs: dict[str, Any]) -> None:
    prediction = line(cli_runs, "cli-budget", "single")
    (agent,) = prediction["runner"]["agents"]
    assert (agent["termination_reason"], agent["exit_status"], agent["iteration_cap_hit"]) == (
        "iteration_limit", "BudgetExhausted", True)
    assert agent["usage"]["responses"] == prediction["usage"]["model_calls"] == 3
    steps = trajectory(cli_runs, "cli-budget", "single", "single_agent")
    assert [s["type"] for s in steps].count("response") == 3
    (refusal,) = [s for s in steps if s["type"] == "error"]
    assert (refusal["status"], refusal["code"]) == (429, "budget_exhausted")
    assert "the model answered 429" in steps[-2]["content"]  # the agent's own stderr: it stopped on the refusal
