"""`evaluate.py --executor ray` on a real Ray cluster started here: the local executor's results, resumable with
either executor, a worker node killed mid-run (said on stderr, its containers swept), Ctrl-C (no stop marker left),
and an image missing on one node only.

One cluster serves the module (asyncodebench.run.local_ray): a head that runs no evaluation, `node-a` on this
machine's Docker daemon and `node-b` on a dockerd of its own (DOCKER_HOST in its environment), which starts without
the demo image. Each worker offers `docker` plus a resource named after it, so a run can be sent to one node with
--ray-resources. Runs use the settings of the session's shared local run (`shared_demo_run`), whose results they
must reproduce: an evaluation then asks for two CPUs (two containers of one CPU) and each worker has two, so each
node evaluates one prediction at a time. One test adds `node-c` on node-a's daemon for its own time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest
from helpers.checkout import ROOT, script_env
from helpers.containers import run_containers
from helpers.daemon import Daemon
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import FAST_FLAGS, SHARED_RUN_MEMORY, SHARED_RUN_PIDS, EvalRun, evaluate_command, run_evaluate
from helpers.polling import wait_for
from helpers.predictions import example_predictions, jsonl

from asyncodebench.run.local_ray import LocalCluster
from asyncodebench.run.ray_node import owner_of, remove_orphans, stop_marker
from asyncodebench.run.runfolder import container_key, result_files

pytestmark = [pytest.mark.docker, pytest.mark.ray]

MODELS = ["demo-empty", "demo-gold", "demo-partial"]  # quick ones (a collection error runs every probe alone)
LOOP = "hostile-infinite-loop"  # what keeps the Ctrl-C test's run busy until the signal
Rows = dict[str, dict[str, Any]]  # model -> its report row without the line number
FLAGS = (*FAST_FLAGS, "--memory", SHARED_RUN_MEMORY, "--pids", str(SHARED_RUN_PIDS))  # the shared run's settings


class Cluster(NamedTuple):
    ray: LocalCluster
    daemon: Daemon  # node-b's own dockerd
    flags: tuple[str, ...]  # what makes evaluate.py use this cluster

    def daemon_of(self, node: str) -> str | None:
        """DOCKER_HOST of a node's daemon (None: this machine's)."""
        return self.daemon.host if node == "node-b" else None


@pytest.fixture(scope="module")
def cluster(demo_dataset: DemoDataset) -> Iterator[Cluster]:
    if importlib.util.find_spec("ray") is None:
        pytest.fail("Ray is not installed: these tests need the kit's ray extra (.venv/bin/python -m pip install -e "
                    "'.[test,ray]'; scripts/run_tests.sh installs it)", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="acb-ray-", dir="/tmp"))  # short: socket paths must fit in 108 bytes
    (root / "dockerd").mkdir()
    daemon = Daemon(root / "dockerd")
    ray = LocalCluster(root / "cluster")
    try:
        daemon.start()
        ray.start_head()
        ray.add_worker("node-a", 2, {"docker": 1, "node_a": 1}, script_env(), wait=False)
        ray.add_worker("node-b", 2, {"docker": 1, "node_b": 1}, script_env({"DOCKER_HOST": daemon.host}), wait=False)
        ray.wait_ready("node-a", "node-b")
        yield Cluster(ray, daemon, ("--executor", "ray", "--ray-address", ray.address, "--pull"))
    finally:
        ray.stop()
        if daemon.process is not None and daemon.process.poll() is None:
            daemon.kill()  # nothing of ours runs there any more; a clean stop takes some 15 s
        daemon.stop()
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def predictions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    examples = example_predictions()
    path = tmp_path_factory.mktemp("ray-preds") / "preds.jsonl"
    path.write_bytes(jsonl([examples[m] for m in MODELS]))
    return path


@pytest.fixture(scope="module")
def reference(shared_demo_run: EvalRun) -> Rows:
    """What the local executor gave for each model, with the same settings (line numbers aside)."""
    return {model: row for model, row in rows(shared_demo_run.report).items() if model in MODELS}


def rows(report: dict[str, Any]) -> Rows:
    """What a prediction's row says, minus its line and the end of its evaluator output, whose test names come from
    sentinels drawn afresh for each evaluation."""
    return {r["model_name_or_path"]: {k: v for k, v in r.items() if k not in ("line", "output_tail")}
            for r in report["predictions"]}


def leftovers(cluster: Cluster, run_id: str) -> dict[str, list[str]]:
    return {node: run_containers(run_id, cluster.daemon_of(node)) for node in ("node-a", "node-b")}


# --- leftovers of dead attempts ----------------------------------------------------------------------------------


def test_a_task_removes_the_run_containers_of_dead_attempts_and_nothing_else(demo_dataset: DemoDataset) -> None:
    """What every Ray task does first on its node's daemon (ray_node.remove_orphans), with owners on this node:
    a dead worker's containers of the run go; a live worker's, another run's and unowned ones stay."""
    import docker

    client = docker.from_env()
    node, dead = "f" * 56, subprocess.Popen(["true"])
    dead.wait()
    run, other = "orphans-0123abcd", "orphans-4567cdef"
    made = {}
    for name, label, owner in (("dead", run, owner_of(node, dead.pid)), ("live", run, owner_of(node, os.getpid())),
                               ("other-run", other, owner_of(node, dead.pid)), ("unowned", run, None)):
        labels = {"org.asyncodebench.run_id": label, **({"org.asyncodebench.owner": owner} if owner else {})}
        made[name] = client.containers.create(demo_dataset.pinned_ref, ["true"], labels=labels, network_mode="none")
    def exists(container: Any) -> bool:
        try:
            return client.containers.get(container.id) is not None
        except docker.errors.NotFound:
            return False

    try:
        assert remove_orphans(client, run, node) == 1
        assert {name for name, c in made.items() if exists(c)} == {"live", "other-run", "unowned"}
    finally:
        for container in made.values():
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass


# --- no cluster, no node ----------------------------------------------------------------------------------------


def test_a_cluster_that_does_not_answer_or_has_no_node_for_the_work_is_an_infrastructure_error(
        cluster: Cluster, demo_dataset: DemoDataset, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.2", 0))
        port = probe.getsockname()[1]
    gold = [example_predictions()["demo-gold"]]
    for run_id, flags, kind in (
            ("nocluster", ("--executor", "ray", "--ray-address", f"127.0.0.2:{port}"), "ray_unavailable"),
            ("nonode", (*cluster.flags, "--ray-resources", '{"nowhere": 1}'), "ray_no_node")):
        done = run_evaluate(gold, demo_dataset.path, run_id, tmp_path, *FLAGS, *flags)
        assert done.returncode == 3, done.stderr[-3000:]
        (row,) = done.report["predictions"]
        assert row["status"] == "infrastructure_error" and row["infrastructure_error"]["kind"] == kind, row


def test_nodes_refuse_to_grade_with_other_code_than_the_drivers(
        cluster: Cluster, demo_dataset: DemoDataset, tmp_path: Path) -> None:
    """The driver runs a copy of the kit with one changed line; the nodes have the checkout's: no node grades."""
    copy = tmp_path / "kit"
    shutil.copytree(ROOT / "asyncodebench", copy / "asyncodebench", ignore=shutil.ignore_patterns("__pycache__"))
    for beside in ("schemas", "data"):  # what the package reads from its checkout
        (copy / beside).symlink_to(ROOT / beside)
    with (copy / "asyncodebench" / "scoring" / "results.py").open("a") as changed:
        changed.write("\n# a changed line\n")
    gold = [example_predictions()["demo-gold"]]
    done = run_evaluate(gold, demo_dataset.path, "otherkit", tmp_path, *FLAGS, *cluster.flags,
                        env={"PYTHONPATH": str(copy)})
    assert done.returncode == 3, done.stderr[-3000:]
    (row,) = done.report["predictions"]
    assert row["status"] == "infrastructure_error" and row["infrastructure_error"]["kind"] == "kit_mismatch", row
    message = row["infrastructure_error"]["message"]
    assert message.startswith("3 attempt(s) failed: ") and "install the driver's kit on every node" in message
    assert "on node node-a (" in message and "on node node-b (" in message  # tried on both, named
    said = [line for line in done.stderr.splitlines() if line.startswith("warning: line 1 (")]
    assert [line.rsplit("; ", 1)[-1] for line in said] == [f"trying again (attempt {n} of 3)" for n in (2, 3)], said
    assert leftovers(cluster, "otherkit") == {"node-a": [], "node-b": []}


# --- an image missing on one node (first: node-b's daemon starts without the demo image) -------------------------


def test_an_image_missing_on_one_node_is_an_infrastructure_error_naming_it_and_pulled_when_allowed(
        cluster: Cluster, demo_dataset: DemoDataset, reference: Rows, tmp_path: Path) -> None:
    on_b = ("--executor", "ray", "--ray-address", cluster.ray.address, "--ray-resources", '{"node_b": 0.01}')
    gold = [example_predictions()["demo-gold"]]
    missing = run_evaluate(gold, demo_dataset.path, "missing", tmp_path, *FLAGS, *on_b)
    assert missing.returncode == 3, missing.stderr[-3000:]
    (row,) = missing.report["predictions"]
    assert row["status"] == "infrastructure_error" and row["infrastructure_error"]["kind"] == "image_missing"
    message = row["infrastructure_error"]["message"]
    assert message.startswith("3 attempt(s) failed: on node node-b (") and "not on this machine" in message
    image = missing.report["run"]["images"][row["task_id"]]
    assert image["state"] == "missing" and "on node node-b" in image["detail"]
    assert "on node node-b" in missing.report["run"]["baselines"][row["task_id"]]["problem"]

    pulled = run_evaluate(gold, demo_dataset.path, "missing", tmp_path, *FLAGS, *on_b, "--pull")
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    assert rows(pulled.report) == {"demo-gold": reference["demo-gold"]}
    assert pulled.report["run"]["images"][row["task_id"]]["state"] == "match"
    assert leftovers(cluster, "missing") == {"node-a": [], "node-b": []}


# --- the same results as the local executor, and a local run resumed on Ray -------------------------------------


def test_ray_resumes_a_local_run_and_gives_the_local_executors_results(
        cluster: Cluster, demo_dataset: DemoDataset, predictions: Path, reference: Rows,
        shared_demo_run: EvalRun, tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    first.write_bytes(jsonl([example_predictions()[MODELS[0]]]))  # line 1 in both files
    local = run_evaluate(first, demo_dataset.path, "mixed", tmp_path, *FLAGS)
    assert local.returncode == 0, local.stderr[-3000:]
    finished = local.folder(MODELS[0]) / "result.json"
    stamp = finished.stat().st_mtime_ns

    on_ray = run_evaluate(predictions, demo_dataset.path, "mixed", tmp_path, *FLAGS, *cluster.flags)
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    assert "1 predictions were already finished" in on_ray.stdout
    assert finished.stat().st_mtime_ns == stamp  # resumed, not redone
    assert on_ray.report["run"]["work"] == {"evaluated_now": 2, "already_finished": 1}
    assert rows(on_ray.report) == reference
    for model in MODELS:  # the same files, in the same layout, from either executor
        assert sorted(p.name for p in on_ray.folder(model).iterdir()) == \
            sorted(p.name for p in shared_demo_run.folder(model).iterdir())
    assert sorted(p.name for p in on_ray.run_dir.iterdir()) == \
        sorted(p.name for p in shared_demo_run.run_dir.iterdir())
    assert leftovers(cluster, "mixed") == {"node-a": [], "node-b": []}


# --- Ctrl-C, then the run resumed by the local executor -----------------------------------------------------------


def test_ctrl_c_cancels_the_ray_tasks_removes_their_containers_and_the_local_executor_resumes(
        cluster: Cluster, demo_dataset: DemoDataset, shared_demo_run: EvalRun, tmp_path: Path) -> None:
    # The infinite loop keeps the run going for its whole --timeout and more (each of its probes runs to its own
    # limit): the signal goes once a quick prediction has finished and while the loop has no result, so however
    # slow the machine, the run cannot have ended first.
    models = [*MODELS, LOOP]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_bytes(jsonl([example_predictions()[m] for m in models]))
    reference = {model: row for model, row in rows(shared_demo_run.report).items() if model in models}
    command = evaluate_command(predictions, demo_dataset.path, "ctrlc", tmp_path, *FLAGS, *cluster.flags)
    process = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    loop_done = lambda: any(f.parent.name.startswith(f"{LOOP}__") for f in result_files(tmp_path / "ctrlc"))  # noqa: E731
    started = lambda: (result_files(tmp_path / "ctrlc") and not loop_done()  # noqa: E731
                       and any(leftovers(cluster, "ctrlc").values()))
    assert wait_for(started, 300), "the run never got going"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    hint = stderr.split("resume with:", 1)[-1]
    assert process.returncode == 130 and "--run-id ctrlc" in hint and "--executor ray" in hint, stderr[-3000:]
    assert leftovers(cluster, "ctrlc") == {"node-a": [], "node-b": []}
    markers = stop_marker(container_key(tmp_path / "ctrlc", "ctrlc"), "*")  # the nodes' temp dir is this machine's
    assert sorted(markers.parent.glob(markers.name)) == []
    finished = len(result_files(tmp_path / "ctrlc"))
    assert 1 <= finished < len(models) and not loop_done()  # cancelled work recorded nothing

    resumed = run_evaluate(predictions, demo_dataset.path, "ctrlc", tmp_path, *FLAGS, "--max-workers", "2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{finished} predictions were already finished" in resumed.stdout
    assert rows(resumed.report) == reference


def test_a_stop_marker_turns_away_only_its_sessions_tasks_until_the_run_starts_again() -> None:
    """What Ctrl-C leaves on each node instead of cancelling Ray tasks (ray_node.cleanup_task with `stop`)."""
    from asyncodebench.run.ray_node import cleanup_task, kit_fingerprint, refusal, stop_marker

    label, kit = f"marker-{os.getpid()}", kit_fingerprint()
    try:
        cleanup_task(label, stop="s1")
        assert refusal(label, "s1", kit) == ("interrupted", "the run was interrupted (Ctrl-C)")
        assert refusal(label, "s2", kit) is None and refusal(f"{label}-other", "s1", kit) is None
        cleanup_task(label)  # a run of this label starts (a resume): its markers go
        assert refusal(label, "s1", kit) is None and not stop_marker(label, "s1").exists()
    finally:
        stop_marker(label, "s1").unlink(missing_ok=True)


# --- a worker node dies mid-run (last: the nodes are restarted) -------------------------------------------------


class _Steps:
    """Finds a step just starting on the given nodes' daemons once a prediction of the run has finished: a container
    of the run that was not running at the last look (~0.1 s ago), owned by a live Ray worker. One seen running for
    longer may be in its teardown already (removed by force while it still shows as running), and would be gone by
    the time its node is killed."""

    def __init__(self, cluster: Cluster, run_id: str, run_dir: Path, nodes: tuple[str, ...]) -> None:
        self.cluster, self.run_id, self.run_dir, self.nodes = cluster, run_id, run_dir, nodes
        self.seen: set[str] = set()  # containers of the run seen running so far
        self.found: tuple[str, str] | None = None  # (node name, Ray node id) of a worker starting a step

    def __call__(self) -> bool:
        finished = bool(result_files(self.run_dir))
        for node in self.nodes:
            running = _containers(self.run_id, self.cluster.daemon_of(node), running=True)
            new = [owner for container, owner in running.items() if container not in self.seen]
            self.seen.update(running)
            for owner in new if finished else []:
                try:
                    self.found = (self.cluster.ray.node_of(int(owner.split("/")[2])), owner.split("/")[1])
                    return True
                except (OSError, ValueError, IndexError):  # that worker is gone already, or not a Ray worker's
                    continue
        return False


def _died(stderr: str, node: str) -> list[str]:
    """The lines saying that this node died (a node killed by an earlier test may be seen dying too: its own line)."""
    said = f"warning: Ray node {node} ("
    return [line for line in stderr.splitlines() if line.startswith(said) and " died; " in line]


def test_a_dead_nodes_containers_go_at_once_through_a_node_on_its_daemon_and_its_work_waits_for_it_to_return(
        cluster: Cluster, demo_dataset: DemoDataset, reference: Rows, tmp_path: Path) -> None:
    """The run may use node-a only (--ray-resources). node-c, started here on node-a's daemon, offers `docker` but
    runs none of the run's work. node-a is killed mid-step: stderr names it and the prediction that moves, and a
    sweep through node-c removes its containers while the run waits for a node that can run the work; node-a comes
    back (under a new node id) and the run finishes there."""
    models = ["demo-empty", "demo-gold"]
    two = tmp_path / "two.jsonl"
    two.write_bytes(jsonl([example_predictions()[m] for m in models]))
    on_a = ("--executor", "ray", "--ray-address", cluster.ray.address, "--pull", "--ray-resources", '{"node_a": 0.01}')
    cluster.ray.add_worker("node-c", 1, {"docker": 1}, script_env())
    process = subprocess.Popen(evaluate_command(two, demo_dataset.path, "swept", tmp_path, *FLAGS, *on_a), cwd=ROOT,
                               env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        steps = _Steps(cluster, "swept", tmp_path / "swept", ("node-a",))
        assert wait_for(steps, 180) and steps.found, "the run never got going"
        victim_id = steps.found[1]
        waiting = [m for m in models if not any(f.parent.name.startswith(f"{m}__")
                                                for f in result_files(tmp_path / "swept"))]
        cluster.ray.kill("node-a")

        def left() -> list[str]:
            return sorted(o for o in _containers("swept", cluster.daemon_of("node-a")).values() if victim_id in o)

        assert left(), "the killed node was running a step: its containers are left on its daemon"
        # nothing can run the run's work now (it waits for a node with node_a): only a sweep removes them
        assert wait_for(lambda: not left(), 120), f"a dead node's containers stayed: {left()}"
        cluster.ray.restart("node-a")
        _, stderr = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        cluster.ray.kill("node-c")
    assert process.returncode == 0, stderr[-3000:]
    report = json.loads((tmp_path / "swept" / "report.json").read_text())
    assert report["run"]["work"] == {"evaluated_now": 2, "already_finished": 0}
    # The evaluator's verdict, not the probes' figures: on a busy machine a probe may meet its 10 s timeout in this
    # run or in the reference (seen), and the same work on two executors is compared by the tests above.
    verdict = ("status", "outcome", "final_success", "tests_passed", "tests_denominator", "patch_status")
    assert {m: {k: row[k] for k in verdict} for m, row in rows(report).items()} == \
        {m: {k: reference[m][k] for k in verdict} for m in models}
    (moved,) = waiting
    died_lines = _died(stderr, "node-a")
    assert len(died_lines) == 1, stderr[-5000:]
    died = died_lines[0]
    assert died.startswith(f"warning: Ray node node-a ({victim_id[:12]}) at 127.0.0.2 died; its work in flight goes "
                           "to another node: line "), died
    assert died.count("line ") == 1 and f", {moved}, " in died, (moved, died)
    assert "may still run there" not in stderr, stderr[-3000:]
    assert leftovers(cluster, "swept") == {"node-a": [], "node-b": []}


def test_a_worker_node_killed_mid_run_loses_and_doubles_nothing_and_its_leftovers_go_on_resume(
        cluster: Cluster, demo_dataset: DemoDataset, predictions: Path, reference: Rows, tmp_path: Path) -> None:
    """No live node shares the killed node's daemon and it does not come back during the run: stderr names it and
    what moved, the end of the run says its containers may remain and how to remove them, and the run resumed once
    the node is back removes them."""
    command = evaluate_command(predictions, demo_dataset.path, "killed", tmp_path, *FLAGS, *cluster.flags)
    process = subprocess.Popen(command, cwd=ROOT, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    steps = _Steps(cluster, "killed", tmp_path / "killed", ("node-a", "node-b"))
    assert wait_for(steps, 180) and steps.found, "the run never got going"
    victim, victim_id = steps.found
    cluster.ray.kill(victim)

    def left() -> list[str]:
        return sorted(o for o in _containers("killed", cluster.daemon_of(victim)).values() if victim_id in o)

    stranded = _settled(left)  # a removal the dead worker asked for just before it died may still be under way
    assert stranded, "the killed node was running a step: its containers are left on its daemon"
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    report = json.loads((tmp_path / "killed" / "report.json").read_text())
    assert report["run"]["work"] == {"evaluated_now": len(MODELS), "already_finished": 0}  # each recorded once
    assert rows(report) == reference
    died_lines = _died(stderr, victim)
    assert len(died_lines) == 1, stderr[-5000:]
    died = died_lines[0]
    assert died.startswith(f"warning: Ray node {victim} ({victim_id[:12]}) at 127.0.0.2 died; its work in flight "
                           "goes to another node: line "), died
    assert any(f", {model}, " in died for model in MODELS), died
    label = container_key(tmp_path / "killed", "killed")
    (remain,) = [line for line in stderr.splitlines() if "may still run there" in line]
    assert remain.startswith(f"warning: Ray node {victim} ({victim_id[:12]}) at 127.0.0.2 died during the run")
    assert f"docker ps -aq --filter label=org.asyncodebench.run_id={label}" in remain, remain
    # nothing else runs on that daemon: its leftovers wait for the node to come back
    assert left() == stranded

    cluster.ray.restart(victim)
    resumed = run_evaluate(predictions, demo_dataset.path, "killed", tmp_path, *FLAGS, *cluster.flags)
    assert resumed.returncode == 0 and f"{len(MODELS)} predictions were already finished" in resumed.stdout
    assert leftovers(cluster, "killed") == {"node-a": [], "node-b": []}, resumed.stderr[-3000:]


def _containers(run_id: str, docker_host: str | None, running: bool = False) -> dict[str, str]:
    """Container id -> owner label, of the run's containers on a daemon (of its running ones only, with `running`)."""
    env = {**script_env(), **({"DOCKER_HOST": docker_host} if docker_host else {})}
    done = subprocess.run(["docker", "ps", "--no-trunc", *([] if running else ["-a"]), "--filter",
                           "label=org.asyncodebench.run_id", "--format",
                           '{{.ID}} {{.Label "org.asyncodebench.run_id"}} {{.Label "org.asyncodebench.owner"}}'],
                          capture_output=True, text=True, env=env)
    fields = [line.split(" ", 2) for line in done.stdout.splitlines()]
    return {f[0]: f[2] for f in fields if len(f) == 3 and f[1].startswith(f"{run_id}-") and f[2]}


def _settled(listing: Any, seconds: float = 60) -> Any:
    """What `listing()` gives once it gives the same three times in a row, a second apart."""
    deadline, last, same = time.monotonic() + seconds, None, 0
    while time.monotonic() < deadline:
        now = listing()
        same = same + 1 if now == last else 0
        if same == 2:
            return now
        last = now
        time.sleep(1)
    raise AssertionError(f"still changing after {seconds} s: {last}")
