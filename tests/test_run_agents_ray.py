"""`run_agents.py --executor ray` on a real Ray cluster started here (asyncodebench.run.local_ray: a head that runs
no scenario and `node-a` on this machine's Docker daemon, with the `docker` resource), the scripted model server on
127.0.0.1, which the local node reaches.

The same scripted agents run three demo scenarios (single, serial_specialists, async_private) twice: once with the
local executor, once into a run folder started with the Ray executor (single, async_private and the two manager
protocols, two at a time) and resumed with the local one (serial_specialists added). Both runs' predictions agree,
evaluate.py scores them the same, the manager protocols reach gold on Ray, the Ray run's start removes a container an
earlier start of it left, and no container of either run is left on the daemon. Ctrl-C during a Ray run leaves no
container and no stop marker; a node with other kit code refuses.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest
from helpers.agent_scripts import DEMO_TASK, SUBMIT, apply, demo_patch, manager_reply, run_agents, write_scripts
from helpers.checkout import ROOT, SCRIPTS, script_env
from helpers.containers import RUN_LABEL, run_containers
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import EvalRun
from helpers.polling import wait_for

from asyncodebench.agents.ray_scenarios import ScenarioResult, scenario_task
from asyncodebench.run.local_ray import LocalCluster
from asyncodebench.run.ray_node import stop_marker
from asyncodebench.run.runfolder import container_key

pytestmark = [pytest.mark.docker, pytest.mark.ray]

GOLD = {
    f"{DEMO_TASK}/single/single_agent": ["git status --short", apply(demo_patch("gold")), SUBMIT],
    "core_agent": [apply(demo_patch("producer_only")), SUBMIT],
    "api_agent": [apply(demo_patch("consumer_only")), SUBMIT],
    "manager": [manager_reply()] * 8,  # a manager that lets the specialists work: T = 2n + 1, as async_private
}
LOCAL = "*/single,*/serial_specialists,*/async_private"
MANAGERS = ("async_manager", "caid_manager")
ON_RAY = "*/single,*/async_private,*/caid_manager,*/async_manager"
ALL = f"{LOCAL},*/caid_manager,*/async_manager"
LIMITS = ("--memory", "1g", "--pids", "256")  # async_private asks for 3 containers: 3 CPUs, 3 GB on a node


@pytest.fixture(scope="module")
def cluster_address() -> Iterator[str]:
    if importlib.util.find_spec("ray") is None:
        pytest.fail("Ray is not installed: these tests need the kit's ray extra (.venv/bin/python -m pip install -e "
                    "'.[test,ray]')", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="acb-agents-ray-", dir="/tmp"))  # short: socket paths fit in 108 bytes
    ray = LocalCluster(root / "cluster")
    try:
        ray.start_head()
        ray.add_worker("node-a", 4, {"docker": 1}, script_env())
        yield ray.address
    finally:
        ray.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def runs(demo_dataset: DemoDataset, cluster_address: str, evaluate: Callable[..., EvalRun],
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("agents-ray")
    scripts = write_scripts(out / "gold.json", GOLD)
    local_id, ray_id = f"local-{secrets.token_hex(3)}", f"ray-{secrets.token_hex(3)}"
    local = run_agents(scripts, demo_dataset.path, out, local_id, "--scenarios", LOCAL, "--name", "scripted-local",
                       *LIMITS)
    assert local.returncode == 0, local.stderr[-3000:]
    leftover = leave_container(demo_dataset.pinned_ref, container_key(out / ray_id, ray_id))  # a dead start's
    on_ray = run_agents(scripts, demo_dataset.path, out, ray_id, "--scenarios", ON_RAY, "--name", "scripted-ray",
                        "--max-workers", "2", "--executor", "ray", "--ray-address", cluster_address, *LIMITS,
                        "--pull")  # node-a has the image: the nodes' check passes without pulling
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    ray_lines = read_lines(out / ray_id)
    resumed = run_agents(scripts, demo_dataset.path, out, ray_id, "--scenarios", ALL, "--name", "scripted-ray",
                         *LIMITS)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    combined = out / "both.jsonl"
    combined.write_text((out / local_id / "predictions.jsonl").read_text()
                        + (out / ray_id / "predictions.jsonl").read_text())
    # the official time limits: a probe cut short on a loaded machine would score one run apart from the other
    evaluated = evaluate(combined, demo_dataset.path, "--max-workers", "2",
                         run_id=f"agents-ray-eval-{secrets.token_hex(3)}")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    return {"local": read_lines(out / local_id), "ray_only": ray_lines, "resumed": read_lines(out / ray_id),
            "ray_dir": out / ray_id, "resumed_stderr": resumed.stderr, "eval": evaluated,
            "left": run_containers(local_id) + run_containers(ray_id), "leftover": leftover}


def leave_container(image: str, key: str) -> str:
    """A stopped container of the run, as a killed earlier start leaves on a node's daemon."""
    import docker

    container = docker.from_env().containers.create(image, ["true"], labels={RUN_LABEL: key}, network_mode="none")
    return str(container.id)


def read_lines(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run's predictions by protocol."""
    lines = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return {p["protocol"]: p for p in lines}


def shape(prediction: dict[str, Any]) -> dict[str, Any]:
    """What two runs of the same scripts must share: the patches and the checkpoints' structure (times aside), the
    fields of the line and the agents' and events' order."""
    checkpoints = prediction.get("checkpoints")
    return {
        "fields": sorted(prediction), "model_patch": prediction["model_patch"],
        "agent_patches": prediction.get("agent_patches"),
        "checkpoints": None if checkpoints is None else json.loads(json.dumps(checkpoints), object_hook=untimed),
        "agents": [a["agent_id"] for a in prediction["runner"]["agents"]],
        "events": [e.get("event") for e in prediction["runner"]["events"]],
        "trajectories": prediction["trajectories"],
    }


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if "time" not in k and "seconds" not in k}


def test_the_ray_executor_gives_the_local_predictions(runs: dict[str, Any]) -> None:
    assert sorted(runs["ray_only"]) == ["async_manager", "async_private", "caid_manager", "single"]
    for protocol in ("single", "async_private"):
        assert shape(runs["ray_only"][protocol]) == shape(runs["local"][protocol])
    assert runs["ray_only"]["single"]["model_patch"] == demo_patch("gold")
    assert sorted(runs["ray_only"]["async_private"]["agent_patches"]) == ["api_agent", "core_agent"]


def test_the_driver_writes_the_scenario_files_into_the_run_folder(runs: dict[str, Any]) -> None:
    run_dir = runs["ray_dir"]
    for prediction in runs["ray_only"].values():
        folder = run_dir / prediction["runner"]["folder"]
        assert (folder / "prediction.json").is_file()
        for trajectory in prediction["trajectories"]:
            lines = (run_dir / trajectory).read_text().splitlines()
            assert lines and all(json.loads(line) for line in lines)
        for agent in prediction["runner"]["agents"]:
            if agent["agent_id"] != "manager":  # the managers write no code
                assert (folder / "patches" / f"{agent['agent_id']}.diff").is_file()


def test_a_run_started_on_ray_resumes_with_the_local_executor(runs: dict[str, Any]) -> None:
    assert "5 of 5 scenarios finished (4 from an earlier start)" in runs["resumed_stderr"]
    assert sorted(runs["resumed"]) == ["async_manager", "async_private", "caid_manager", "serial_specialists", "single"]
    for protocol in runs["ray_only"]:  # kept as the Ray tasks gave them
        assert runs["resumed"][protocol] == runs["ray_only"][protocol]
    assert shape(runs["resumed"]["serial_specialists"]) == shape(runs["local"]["serial_specialists"])


def test_evaluate_scores_both_executors_runs_the_same(runs: dict[str, Any]) -> None:
    report = runs["eval"].report
    assert report["counts"]["evaluated"] == 8 and report["counts"]["infrastructure_errors"] == 0
    by_run: dict[str, dict[str, Any]] = {}
    for row in report["predictions"]:
        kept = {k: v for k, v in row.items()
                if k not in ("line", "model_name_or_path", "output_tail", "usage", "trajectories", "runtime_seconds")}
        by_run.setdefault(row["model_name_or_path"], {})[row["protocol"]] = kept
    assert {p: r for p, r in by_run["scripted-ray"].items() if p not in MANAGERS} == by_run["scripted-local"]
    assert {p: r["final_success"] for p, r in by_run["scripted-ray"].items()} == {
        "single": True, "serial_specialists": True, "async_private": True, "caid_manager": True, "async_manager": True}


def test_the_manager_protocols_run_on_ray_as_the_rows_define_them(runs: dict[str, Any]) -> None:
    report = runs["eval"].report
    for protocol in MANAGERS:
        prediction = runs["ray_only"][protocol]
        order = [e["event"] for e in prediction["runner"]["events"]]
        assert "manager_started" in order and order.count("integration_after_merge") == 2
        assert [a["agent_id"] for a in prediction["runner"]["agents"]].count("manager") == 1
        (row,) = [r for r in report["predictions"]
                  if (r["model_name_or_path"], r["protocol"]) == ("scripted-ray", protocol)]
        # the manager never acted: each specialist's artifact and merge, then the final state
        assert (row["checkpoint_count"], row["integration_source"], row["agents_integrated"]) == (5, "runner", 2)


def test_the_run_removes_its_leftovers_and_leaves_nothing_on_the_daemon(runs: dict[str, Any]) -> None:
    assert subprocess.run(["docker", "inspect", runs["leftover"]], capture_output=True).returncode != 0
    assert runs["left"] == []


@pytest.mark.parametrize(("flags", "says"), [
    (("--ray-address", "127.0.0.1:6379"), "--ray-address goes with --executor ray"),
    (("--executor", "dask"), "invalid choice: 'dask'"),
])
def test_bad_executor_flags_are_refused(tmp_path: Path, flags: tuple[str, ...], says: str) -> None:
    scripts = write_scripts(tmp_path / "s.json", GOLD)
    done = run_agents(scripts, tmp_path, tmp_path, "bad-flags", "--scenarios", "*/single", *flags)
    assert done.returncode == 2 and says in done.stderr


def test_a_node_with_other_kit_code_refuses_the_scenario(cluster_address: str) -> None:
    """The node compares the driver's kit fingerprint with its own before anything else (run.ray_node.kit_problem)."""
    import ray

    ray.init(address=cluster_address, logging_level="ERROR", log_to_driver=False)
    try:
        task = ray.remote(scenario_task).options(num_cpus=0, resources={"docker": 0.001}, max_retries=0)
        config = SimpleNamespace(container_key=f"refused-{secrets.token_hex(3)}")
        result: ScenarioResult = ray.get(task.remote(config, None, {}, "0.0.0+0123456789abcdef", "session"),
                                         timeout=300)
    finally:
        ray.shutdown()
    assert result.line is None and result.files == {}
    assert result.problem is not None
    assert "the driver 0.0.0+0123456789abcdef: install the driver's kit" in result.problem


def test_ctrl_c_stops_the_scenarios_on_the_nodes(demo_dataset: DemoDataset, cluster_address: str,
                                                 tmp_path: Path) -> None:
    """SIGINT while an agent works on a node: exit 130, the scenario not finished, no container of the run and no
    stop marker left."""
    scripts = write_scripts(tmp_path / "slow.json", {"single_agent": ["sleep 120", SUBMIT]})
    run_id = f"ray-int-{secrets.token_hex(3)}"
    command = [sys.executable, str(SCRIPTS / "run_agents.py"), "--model", "scripted", "--scripts", str(scripts),
               "--dataset", str(demo_dataset.path), "--output-dir", str(tmp_path), "--run-id", run_id,
               "--scenarios", "*/single", "--executor", "ray", "--ray-address", cluster_address, *LIMITS]
    process = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert wait_for(lambda: run_containers(run_id) != [], 300)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr[-3000:]
    assert not list((tmp_path / run_id).glob("scenarios/*/prediction.json"))
    assert run_containers(run_id) == []
    marker = stop_marker(container_key(tmp_path / run_id, run_id), "*")
    assert list(marker.parent.glob(marker.name)) == []


def test_a_scenarios_files_are_carried_within_the_cap_and_stay_in_its_folder(tmp_path: Path) -> None:
    """What a node carries back is cut at a whole line beyond the cap (and marked); the driver writes no file
    outside the scenario's folder."""
    from asyncodebench.agents.ray_scenarios import CUT_MARK, collect, store_result

    folder = tmp_path / "node" / "scenario"
    (folder / "trajectories").mkdir(parents=True)
    (folder / "patches").mkdir()
    (folder / "patches" / "a.diff").write_bytes(b"x" * 100)
    (folder / "trajectories" / "a.jsonl").write_bytes(b'{"n": 1}\n' * 100)
    (folder / "prediction.json").write_text("{}")
    files = collect(folder, cap=100 + 200)
    assert sorted(files) == ["patches/a.diff", "trajectories/a.jsonl"]
    assert files["patches/a.diff"] == b"x" * 100
    kept = files["trajectories/a.jsonl"]
    assert kept.endswith(CUT_MARK) and len(kept) <= 200
    assert all(json.loads(line) == {"n": 1} for line in kept[:-len(CUT_MARK)].splitlines())
    line = {"runner": {"scenario_id": "demo:x/single"}}
    with pytest.raises(ValueError, match="outside the scenario folder"):
        store_result(tmp_path / "run", ScenarioResult("node", line, {"../../escape": b"no"}))
    assert not (tmp_path / "escape").exists()
