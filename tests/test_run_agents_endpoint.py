"""A broken model endpoint is never scored as the model's failure: scripts/run_agents.py on the demo task with real
containers, against the scripted server started here (its replies include the failures of a real endpoint: an HTTP
status, or no answer at all), so the test can break the server and fix it between runs.

- The preflight refuses a configuration that cannot work (401, 404, tools unsupported, nothing listening; 500 on
  every call after its retries) before anything is written, with the cause and the fix.
- A 500 in the middle of a specialist's run is retried (one stderr line, one trajectory line) and the scenario is a
  result; an endpoint that keeps failing, a prompt over the context window and a server that never answers make it
  invalid: no prediction line, exit 3 with the reason, no container or volume left; a rerun with the same run id
  after the server is fixed redoes exactly that scenario and gives the prediction an uninterrupted run gives, and
  evaluate.py keeps the invalid line out of every mean and lists it.
- The manager's calls go through the same client: a 500 is retried (the manager goes on), a manager never reached
  makes its scenario invalid.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers.agent_scripts import DEMO_TASK, SUBMIT, apply, demo_patch, manager_reply, run_agents, write_scripts
from helpers.checkout import ROOT, SCRIPTS, script_env
from helpers.containers import RUN_LABEL, run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import SCORING_FLAGS

from asyncodebench.agents import runfolder
from asyncodebench.agents.scripted_server import ScriptedServer, parse_scripts
from asyncodebench.agents.trajectory import read_trajectory

pytestmark = pytest.mark.docker

SINGLE = f"{DEMO_TASK}/single"
PREFLIGHT = "true"  # the reply the preflight gets (any reply passes it; a tool call, so no note)
GOLD = [apply(demo_patch("gold")), SUBMIT]
CONTEXT = "This model's maximum context length is 4096 tokens; please reduce the length of the messages."
TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(parse_scripts({"m": [PREFLIGHT]})) as running:
        yield running


def serve(server: ScriptedServer, *replies: Any) -> None:
    server.replace_scripts(parse_scripts({"m": list(replies)}))


def run_endpoint(base_url: str, dataset: Path, output_dir: Path, run_id: str, *flags: str
                 ) -> subprocess.CompletedProcess[str]:
    """run_agents.py against the endpoint `base_url` (model `m`), as a user runs it."""
    env = script_env({"OPENAI_API_KEY": "test-key"})
    return subprocess.run([sys.executable, str(SCRIPTS / "run_agents.py"), "--model", "m", "--base-url", base_url,
                           "--dataset", str(dataset), "--output-dir", str(output_dir), "--run-id", run_id,
                           "--scenarios", SINGLE, *flags], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=env)


def run_volumes(run_id: str) -> list[str]:
    done = subprocess.run(["docker", "volume", "ls", "--filter", f"label={RUN_LABEL}", "--format",
                           f'{{{{.Name}}}} {{{{.Label "{RUN_LABEL}"}}}}'], capture_output=True, text=True, check=True)
    return [line.split(" ", 1)[0] for line in done.stdout.splitlines() if line.split(" ", 1)[-1].startswith(run_id)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("reply", "code", "says"), [
    ({"status": 401, "message": "Incorrect API key provided"}, 2,
     "refused the key (auth (401): scripted server: Incorrect API key provided"),
    ({"status": 404, "message": "The model `m` does not exist"}, 2, "give --model as the server lists it at"),
    ({"status": 400, "message": TOOLS}, 2, "start vLLM with --enable-auto-tool-choice"),
    ({"status": 500, "message": "internal error"}, 3, "gave no usable answer within --endpoint-retry-seconds"),
    (None, 2, "nothing listens at"),
])
def test_a_configuration_that_cannot_work_stops_the_run_before_anything_is_written(
        server: ScriptedServer, demo_dataset: DemoDataset, tmp_path: Path, reply: Any, code: int, says: str) -> None:
    serve(server, *[reply or PREFLIGHT] * 10)
    base_url = server.base_url if reply else f"http://127.0.0.1:{free_port()}/v1"
    run_id = f"preflight-{secrets.token_hex(3)}"
    done = run_endpoint(base_url, demo_dataset.path, tmp_path, run_id, "--endpoint-retry-seconds", "2")
    assert done.returncode == code, done.stderr[-3000:]
    assert says in done.stderr and "error: preflight:" in done.stderr
    assert not (tmp_path / run_id).exists()  # no settings, no prediction, no scenario folder
    if reply and reply["status"] == 401:
        assert "put the endpoint's key in the environment variable OPENAI_API_KEY" in done.stderr


def prediction_of(run_dir: Path) -> dict[str, Any]:
    (line,) = [json.loads(t) for t in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return line


def comparable(line: dict[str, Any]) -> dict[str, Any]:
    """What two runs of the same scripts must share: the work, the tokens, how each agent ended."""
    agents = [(a["agent_id"], a["termination_reason"], a["retries"], a["usage"]["responses"],
               a["usage"]["prompt_tokens"], a["usage"]["completion_tokens"]) for a in line["runner"]["agents"]]
    return {"model_patch": line["model_patch"], "agents": agents, "valid": line["runner"]["valid"],
            "tokens": line["usage"]["total_tokens"]}


def test_a_failing_endpoint_makes_the_scenario_invalid_and_a_rerun_after_the_fix_redoes_exactly_it(
        server: ScriptedServer, demo_dataset: DemoDataset, tmp_path: Path) -> None:
    fixed = (PREFLIGHT, {"status": 500, "message": "one bad moment"}, *GOLD)  # a specialist's 500, mid-run
    serve(server, *fixed)
    whole = run_endpoint(server.base_url, demo_dataset.path, tmp_path, "uninterrupted")
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "server_error (500): scripted server: one bad moment; attempt 2 in 1 s" in whole.stderr
    uninterrupted = prediction_of(tmp_path / "uninterrupted")
    assert uninterrupted["model_patch"] == demo_patch("gold") and uninterrupted["runner"]["valid"]
    (agent,) = uninterrupted["runner"]["agents"]
    assert (agent["termination_reason"], agent["retries"], agent["timeouts"]) == ("agent_finish", 1, 0)
    trajectory = read_trajectory(tmp_path / "uninterrupted" / agent["trajectory"])
    (retry,) = [t for t in trajectory if t["type"] == "retry"]
    assert (retry["failure"], retry["status"], retry["wait_seconds"]) == ("server_error", 500, 1)
    assert uninterrupted["runner"]["model"]["limits"] == {"request_timeout": 600, "retry_seconds": 600,
                                                          "agent_seconds": 21600}  # the defaults, recorded

    serve(server, PREFLIGHT, *[{"status": 503, "message": "overloaded"}] * 30)
    run_id = f"broken-{secrets.token_hex(3)}"
    run_dir = tmp_path / run_id
    broken = run_endpoint(server.base_url, demo_dataset.path, tmp_path, run_id, "--endpoint-retry-seconds", "3")
    assert broken.returncode == 3, broken.stderr[-3000:]
    assert f"invalid, not a result: {SINGLE}: single_agent: provider_or_transport_error" in broken.stderr
    assert "1 scenario(s) invalid, not results (a model endpoint failed" in broken.stderr
    assert "same --run-id and --base-url" in broken.stderr
    assert (run_dir / "predictions.jsonl").read_text() == ""  # no prediction line for it
    folder = runfolder.scenario_folder(run_dir, SINGLE)
    invalid = json.loads((folder / runfolder.INVALID).read_text())
    assert invalid["runner"]["valid"] is False and not (folder / runfolder.RECORD).exists()
    assert [r["termination_reason"] for r in invalid["runner"]["invalid"]] == ["provider_or_transport_error"]
    assert "server_error (503): scripted server: overloaded" in invalid["runner"]["invalid"][0]["detail"]
    assert run_containers(run_id) == [] and run_volumes(run_id) == []

    serve(server, *fixed)  # the server is fixed; the same command again
    resumed = run_endpoint(server.base_url, demo_dataset.path, tmp_path, run_id, "--endpoint-retry-seconds", "3")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"redoing an invalid scenario: {SINGLE}" in resumed.stderr
    assert comparable(prediction_of(run_dir)) == comparable(uninterrupted)
    kept = run_dir / runfolder.INVALID_ATTEMPTS / folder.name / "1" / runfolder.INVALID
    assert json.loads(kept.read_text())["runner"]["valid"] is False  # the invalid attempt is kept, set aside

    # evaluate.py given the invalid line beside the valid one: an infrastructure error, listed, in no mean
    both = tmp_path / "both.jsonl"
    both.write_text((run_dir / "predictions.jsonl").read_text()
                    + json.dumps({**invalid, "run_id": "first-attempt"}) + "\n")
    evaluated = subprocess.run([sys.executable, str(SCRIPTS / "evaluate.py"), str(both), "--dataset",
                                str(demo_dataset.path), "--output-dir", str(tmp_path / "eval"), "--run-id", "both",
                                *SCORING_FLAGS], cwd=ROOT, capture_output=True, text=True, timeout=900,
                               env=script_env())
    assert evaluated.returncode == 3, evaluated.stderr[-3000:]  # infrastructure errors in the run
    report = json.loads((tmp_path / "eval" / "both" / "report.json").read_text())
    assert (report["counts"]["evaluated"], report["counts"]["infrastructure_errors"]) == (1, 1)
    (error,) = [p for p in report["predictions"] if p.get("infrastructure_error")]
    assert error["infrastructure_error"]["kind"] == "agent_run_invalid"
    assert "single_agent: provider_or_transport_error" in error["infrastructure_error"]["message"]
    (row,) = report["summary"]  # one cell: the invalid line is counted and listed, in no mean
    assert (row["predictions"], row["evaluated"], row["infrastructure_errors"], row["tasks"]) == (2, 1, 1, 1)
    assert row["micro_adpr"] == 1.0  # as for the valid line alone (scored, the empty patch would lower it)
    assert "infrastructure: agent_run_invalid" in (tmp_path / "eval" / "both" / "report.md").read_text()


@pytest.mark.parametrize(("replies", "flags", "reason"), [
    ([{"status": 400, "message": CONTEXT}], (), "context_window_error"),
    ([{"hang": True}] * 5, ("--request-timeout", "2", "--endpoint-retry-seconds", "3"),
     "provider_or_transport_error"),
])
def test_a_context_window_error_or_a_server_that_never_answers_is_invalid_and_leaves_nothing(
        server: ScriptedServer, demo_dataset: DemoDataset, tmp_path: Path, replies: list[Any],
        flags: tuple[str, ...], reason: str) -> None:
    serve(server, PREFLIGHT, *replies)
    run_id = f"invalid-{secrets.token_hex(3)}"
    done = run_endpoint(server.base_url, demo_dataset.path, tmp_path, run_id, *flags)
    assert done.returncode == 3, done.stderr[-3000:]
    assert f"single_agent: {reason}" in done.stderr
    folder = runfolder.scenario_folder(tmp_path / run_id, SINGLE)
    invalid = json.loads((folder / runfolder.INVALID).read_text())
    (agent,) = invalid["runner"]["agents"]
    assert agent["termination_reason"] == reason
    if "--request-timeout" in flags:
        assert agent["timeouts"] >= 1
        assert any(t["type"] == "timeout" for t in read_trajectory(tmp_path / run_id / agent["trajectory"]))
    assert run_containers(run_id) == [] and run_volumes(run_id) == []


CAID, ONLINE = f"{DEMO_TASK}/caid_manager", f"{DEMO_TASK}/async_manager"
MANAGERS: dict[str, list[Any]] = {
    f"{CAID}/manager": [{"status": 500, "message": "manager hiccup"}, manager_reply(), manager_reply()],
    f"{CAID}/core_agent": [apply(demo_patch("producer_only")), SUBMIT],
    f"{CAID}/api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
    f"{ONLINE}/manager": [{"status": 502, "message": "manager gone"}] * 40,
    f"{ONLINE}/core_agent": [apply(demo_patch("producer_only")), SUBMIT],
    f"{ONLINE}/api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
}


def test_the_manager_retries_a_500_and_a_manager_never_reached_makes_its_scenario_invalid(
        demo_dataset: DemoDataset, tmp_path: Path) -> None:
    scripts = write_scripts(tmp_path / "scripts.json", MANAGERS)
    run_id = f"managers-{secrets.token_hex(3)}"
    done = run_agents(scripts, demo_dataset.path, tmp_path, run_id, "--scenarios", f"{CAID},{ONLINE}",
                      "--max-workers", "2", "--endpoint-retry-seconds", "3")
    assert done.returncode == 3, done.stderr[-3000:]
    assert "1 of 2 scenarios finished" in done.stderr
    assert f"invalid, not a result: {ONLINE}: manager: provider_or_transport_error" in done.stderr
    (line,) = [json.loads(t) for t in (tmp_path / run_id / "predictions.jsonl").read_text().splitlines()]
    assert line["protocol"] == "caid_manager" and line["runner"]["valid"]
    manager = {a["agent_id"]: a for a in line["runner"]["agents"]}["manager"]
    assert (manager["termination_reason"], manager["retries"]) == ("adapter_completed", 1)
    assert line["model_patch"] == demo_patch("gold")
    invalid = json.loads((runfolder.scenario_folder(tmp_path / run_id, ONLINE) / runfolder.INVALID).read_text())
    assert [r["agent_id"] for r in invalid["runner"]["invalid"]] == ["manager"]
    assert "manager_failed" in [e["event"] for e in invalid["runner"]["events"]]
    assert run_containers(run_id) == [] and run_volumes(run_id) == []
