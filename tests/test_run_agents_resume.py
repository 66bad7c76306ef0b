"""run_agents.py's run folder: killed with SIGKILL in the middle of a scenario, the same command resumes it (finished
scenarios kept, the killed one redone, its containers removed); other settings are refused."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.agent_scripts import DEMO_TASK, SUBMIT, apply, demo_patch, run_agents, write_scripts
from helpers.checkout import ROOT, SCRIPTS, script_env
from helpers.containers import run_containers
from helpers.dataset_folders import DemoDataset
from helpers.polling import wait_for

pytestmark = pytest.mark.docker

SCRIPTS_BY_AGENT = {
    f"{DEMO_TASK}/single/single_agent": [apply(demo_patch("gold")), SUBMIT],
    "core_agent": ["sleep 20", apply(demo_patch("producer_only")), SUBMIT],  # long enough to be killed in
    "api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
}
FLAGS = ("--scenarios", "*/single,*/serial_specialists", "--name", "scripted-resume")


def test_a_killed_run_resumes_where_it_stopped(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    scripts = write_scripts(tmp_path / "scripts.json", SCRIPTS_BY_AGENT)
    run_id = f"resume-{secrets.token_hex(3)}"
    run_dir = tmp_path / run_id
    command = [sys.executable, str(SCRIPTS / "run_agents.py"), "--model", "scripted", "--scripts", str(scripts),
               "--dataset", str(demo_dataset.path), "--output-dir", str(tmp_path), "--run-id", run_id, *FLAGS]
    first = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        single_done = lambda: any(run_dir.glob("scenarios/*single*/prediction.json"))  # noqa: E731
        serial_started = lambda: any(run_dir.glob("scenarios/*serial*/trajectories/core_agent.jsonl"))  # noqa: E731
        assert wait_for(lambda: single_done() and serial_started(), 300)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert run_containers(run_id) != []  # the killed process left its agent's container behind
    assert not (run_dir / "predictions.jsonl").exists()

    again = run_agents(scripts, demo_dataset.path, tmp_path, run_id, *FLAGS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 of 2 scenarios finished (1 from an earlier start)" in again.stderr
    lines = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert [p["protocol"] for p in lines] == ["single", "serial_specialists"]
    assert all(p["model_patch"] == demo_patch("gold") for p in lines)
    assert run_containers(run_id) == []


def test_a_run_folder_is_resumed_only_with_the_same_settings(demo_dataset: DemoDataset, tmp_path: Path) -> None:
    scripts = write_scripts(tmp_path / "scripts.json", {"single_agent": [SUBMIT]})
    run_id = f"settings-{secrets.token_hex(3)}"
    first = run_agents(scripts, demo_dataset.path, tmp_path, run_id, "--scenarios", "*/single")
    assert first.returncode == 0, first.stderr[-3000:]
    other = run_agents(scripts, demo_dataset.path, tmp_path, run_id, "--scenarios", "*/single", "--budget", "5")
    assert other.returncode == 2
    assert "was started with other settings (budget: was None, now 5)" in other.stderr
