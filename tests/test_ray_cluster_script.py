"""scripts/ray_cluster.py: a head and a worker started from one folder form a cluster, `status` shows them, and
`stop` ends exactly their processes while another cluster of the machine (a head started from another folder)
keeps running. Real `ray start` processes on the loopback (127.0.0.2, as asyncodebench.run.local_ray explains)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from helpers.checkout import ROOT, SCRIPTS, script_env

from asyncodebench.run.local_ray import own_session

pytestmark = pytest.mark.ray

LOOPBACK = ("--node-ip-address", "127.0.0.2", "--num-cpus", "1")


@pytest.fixture
def folders() -> Iterator[tuple[Path, Path]]:
    if importlib.util.find_spec("ray") is None:
        pytest.fail("Ray is not installed: this test needs the kit's ray extra (.venv/bin/python -m pip install -e "
                    "'.[test,ray]'; scripts/run_tests.sh installs it)", pytrace=False)
    # short: Ray's socket paths under them must fit in 107 bytes
    made = [Path(tempfile.mkdtemp(prefix="acb-rc-", dir="/tmp")) for _ in range(2)]
    try:
        yield made[0], made[1]
    finally:
        for folder in made:
            cluster("stop", folder)  # whatever a failed test left running
            shutil.rmtree(folder, ignore_errors=True)


def cluster(action: str, folder: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / "ray_cluster.py"), action, "--dir", str(folder), *flags],
                          cwd=ROOT, env=script_env(), capture_output=True, text=True, timeout=300)


def recorded(folder: Path) -> dict[str, dict]:
    return {node["name"]: node for node in json.loads((folder / "nodes.json").read_text())["nodes"]}


def alive(node: dict) -> list[int]:
    return own_session(node["pid"], node["started"])


def test_stop_ends_exactly_the_nodes_started_from_its_folder(folders: tuple[Path, Path]) -> None:
    mine, other = folders
    for folder in folders:
        done = cluster("start", folder, "--head", "--name", "head", *LOOPBACK)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"cluster address: {recorded(folder)['head']['address']}" in done.stdout
    address = recorded(mine)["head"]["address"]
    joined = cluster("start", mine, "--address", address, "--name", "worker", "--docker", *LOOPBACK)
    assert joined.returncode == 0, joined.stderr[-3000:]

    status = cluster("status", mine)
    assert status.returncode == 0, status.stderr[-3000:]
    assert f"head: running, head of {address}" in status.stdout
    assert f"worker: running, worker of {address}" in status.stdout
    look = subprocess.run(  # the worker is a node of the head's cluster, with the docker resource
        [sys.executable, "-c", "import json, sys, ray; ray.init(address=sys.argv[1], log_to_driver=False); "
         "print(json.dumps({n['NodeName']: n['Resources'].get('docker', 0) for n in ray.nodes() if n['Alive']}))",
         address], env=script_env(), capture_output=True, text=True, timeout=120)
    assert json.loads(look.stdout.strip().splitlines()[-1]) == {"head": 0, "worker": 1}, look.stderr[-3000:]

    nodes, bystander = recorded(mine), recorded(other)["head"]
    assert all(alive(node) for node in nodes.values())
    stopped = cluster("stop", mine)
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert stopped.stdout.splitlines() == ["worker: stopped", "head: stopped"]
    assert {name: alive(node) for name, node in nodes.items()} == {"head": [], "worker": []}  # every process
    assert alive(bystander), "the other folder's head was stopped too"
    assert cluster("status", mine).stdout.strip() == f"no node started from {mine}"
    assert "head: running" in cluster("status", other).stdout
