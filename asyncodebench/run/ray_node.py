"""What a Ray task of the Ray executor does on the node that runs it.

Find this node's Docker daemon (the worker's `DOCKER_HOST`, as `ray start` was given it) and the task's pinned image
there (pulled by digest when allowed), remove what dead attempts of the same run left on that daemon, then run the
same work as the local executor (`work`). The driver gets back a `NodeResult` and writes the run folder itself.

Every container a task starts is labelled with its owner, `ray/<node id>/<pid>/<process start time>`. A later task
of the run on the same daemon removes the containers whose owner is gone: a dead process of its own node, or any
process of a node the cluster no longer counts as alive. That makes a retried attempt start clean (Ray re-runs a
task whose worker or node died) and cleans a dead node's daemon when a node there runs the run's next task.

A node grades only with the very code the driver has (`kit_fingerprint`): a node with another version of the kit,
or a modified copy, would score differently without anyone noticing, so it refuses the work, which goes elsewhere.

Ctrl-C on the driver stops the run's work through the nodes, not with `ray.cancel`, which can crash the driver when
it cancels a task that is just completing (a Ray bug): `cleanup_task(..., stop=...)` leaves a stop marker for the
driver's session on the node (a file in the worker's temp dir), so tasks of that session that have not started yet
return at once, and removes the run's containers, so the steps that run fail fast. Once the tasks have returned, the
driver's last `cleanup_task` removes the markers again.

For the driver's view of dead nodes, an attempt notes where it runs (`note_attempt`, in Ray's key-value store:
Ray re-runs a task whose node died under the same task id), and sweeps report the Docker daemon they reached
(`Sweep`), so the driver can tell whether a live node shares a dead node's daemon.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import asyncodebench
from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.evaluation import Settings
from asyncodebench.harness.sandbox import (
    LABEL_OWNER,
    LABEL_RUN,
    SandboxUnavailableError,
    docker_client,
    remove_run_containers,
    set_owner,
)
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.digests import MATCH, ImageStatus
from asyncodebench.run.prediction_result import InfrastructureKind
from asyncodebench.run.work import Job, Outcome, check_image, evaluate_prediction, image_failure_kind, measure_baseline


@dataclass(frozen=True)
class NodeResult:
    """What one attempt found and did on its node. `problem` is an infrastructure failure of this node (its daemon,
    its copy of the image), worth another try elsewhere: (infrastructure error kind, message)."""

    node_id: str
    image: ImageStatus | None  # the pinned image as found on this node; None when its daemon did not answer
    outcome: Outcome | None = None  # a prediction's
    baseline: BaseStateRecord | None = None  # a base state's record
    problem: tuple[InfrastructureKind, str] | None = None


@dataclass(frozen=True)
class Sweep:
    """What a cleanup or sweep task did on its node's daemon."""

    daemon: str | None  # who the Docker daemon is (`daemon_identity`); None: it did not answer
    removed: int  # containers removed


UNREACHABLE_DAEMON: tuple[InfrastructureKind, str] = ("docker_unavailable",
                                                      "the Docker daemon of this node is not reachable")


ATTEMPTS_NAMESPACE = "asyncodebench"  # of Ray's key-value store


def attempts_prefix(session: str) -> str:
    """The keys `attempts/<session>/<Ray task id>/<node id>` a driver session's attempts leave as they start."""
    return f"attempts/{session}/"


def note_attempt(session: str) -> None:
    """Say in Ray's key-value store that this attempt runs on this node (best effort)."""
    import ray
    from ray.experimental.internal_kv import _internal_kv_put

    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    try:
        _internal_kv_put(f"{attempts_prefix(session)}{context.get_task_id()}/{node_id}", b"",
                         namespace=ATTEMPTS_NAMESPACE)
    except Exception:  # the driver then cannot say that this attempt moved, nothing worse
        pass


def kit_fingerprint() -> str:
    """The kit's version and a digest of its code (every file of the package, by path), as installed here."""
    return _fingerprint(Path(asyncodebench.__file__).parent)


@functools.lru_cache(maxsize=None)
def _fingerprint(package: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and p.suffix not in (".pyc", ".pyo") and not p.name.startswith((".", "~"))
                       and not p.name.endswith("~")):  # bytecode, editor and system files are not the code
        digest.update(f"{path.relative_to(package).as_posix()}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return f"{asyncodebench.__version__}+{digest.hexdigest()[:16]}"


def kit_problem(driver_kit: str) -> tuple[InfrastructureKind, str] | None:
    """Why this node must not grade for a driver with `driver_kit` (None: it has the same code)."""
    here = kit_fingerprint()
    if here == driver_kit:
        return None
    return ("kit_mismatch", f"this node has asyncodebench {here}, the driver {driver_kit}: install the driver's "
                            "kit on every node (same version, unmodified)")


def stop_marker(label: str, session: str) -> Path:
    """The file on a node that tells a driver session's tasks of a run not to start."""
    run = hashlib.sha256(label.encode()).hexdigest()[:16]  # labels hold characters a file name should not
    return Path(tempfile.gettempdir()) / f"asyncodebench-stop-{run}-{session}"


def refusal(label: str, session: str, driver_kit: str) -> tuple[InfrastructureKind, str] | None:
    """Why this task must not run here: its run was interrupted, or this node has other code than the driver."""
    if stop_marker(label, session).exists():
        return ("interrupted", "the run was interrupted (Ctrl-C)")
    return kit_problem(driver_kit)


def evaluate_task(job: Job, allow_pull: bool, driver_kit: str, session: str) -> NodeResult:
    """A Ray task: evaluate one prediction on this node."""
    if problem := refusal(job.label, session, driver_kit):
        return NodeResult(_node_id(), None, problem=problem)
    note_attempt(session)
    node_id, client, image = _prepare(job.spec, job.label, allow_pull)
    if client is None or image is None:
        return NodeResult(node_id, None, problem=UNREACHABLE_DAEMON)
    outcome = evaluate_prediction(client, job, image)
    assert outcome is not None  # only a stop request gives none, and Ray stops a task by ending its process
    failure = outcome.result.failure
    if failure and failure.kind in ("sandbox_unavailable", "image_missing", "image_mismatch", "image_unreachable"):
        # this node's fault (its daemon or its copy of the image): another node may do better
        return NodeResult(node_id, image, problem=(failure.kind, failure.message))
    return NodeResult(node_id, image, outcome)


def baseline_task(spec: TaskSpec, label: str, settings: Settings, overlays: dict[str, bytes],
                  allow_pull: bool, driver_kit: str, session: str) -> NodeResult:
    """A Ray task: measure one task's base state on this node."""
    if problem := refusal(label, session, driver_kit):
        return NodeResult(_node_id(), None, problem=problem)
    note_attempt(session)
    node_id, client, image = _prepare(spec, label, allow_pull)
    if client is None or image is None:
        return NodeResult(node_id, None, problem=UNREACHABLE_DAEMON)
    if image.state != MATCH:
        return NodeResult(node_id, image, problem=(image_failure_kind(image),
                                                   f"image {spec.pinned_ref} is {image.state}: {image.detail}"))
    record = measure_baseline(client, spec, label, settings, overlays)
    if isinstance(record, str):
        return NodeResult(node_id, image, problem=("sandbox_unavailable", record))
    return NodeResult(node_id, image, baseline=record)


def cleanup_task(label: str, stop: str | None = None) -> Sweep:
    """A Ray task: remove every container and volume of the run from this node's daemon. With `stop` (a driver
    session), first leave that session's stop marker; without, remove the run's stop markers (a run starting, or
    ending: the run folder is locked, so no other session of the run is under way)."""
    if stop:
        stop_marker(label, stop).touch()
    else:
        pattern = stop_marker(label, "*")
        for marker in pattern.parent.glob(pattern.name):
            marker.unlink(missing_ok=True)
    return _sweep(lambda client: remove_run_containers(client, label))


def sweep_task(label: str) -> Sweep:
    """A Ray task: remove the run's containers on this node's daemon whose owner is gone (a dead node's, say)."""
    node_id = _node_id()
    return _sweep(lambda client: remove_orphans(client, label, node_id))


def daemon_identity(info: dict[str, Any]) -> str:
    """What tells a Docker daemon from every other (from its `docker info`): its ID alone does not, since before
    Docker 23 it comes from the machine's /etc/docker/key.json, which every daemon of the machine shares (and a
    cloned machine too), so its host name and data root go with it."""
    return " ".join(str(info.get(key) or "?") for key in ("ID", "Name", "DockerRootDir"))


def _sweep(remove: Callable[[Any], int]) -> Sweep:
    try:
        client = docker_client()
    except SandboxUnavailableError:
        return Sweep(None, 0)
    removed = remove(client)  # first: telling who the daemon is must never cost the removal
    try:
        daemon: str | None = daemon_identity(client.info())
    except Exception:  # the driver then cannot count this sweep for a dead node on the same daemon
        daemon = None
    return Sweep(daemon, removed)


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _prepare(spec: TaskSpec, label: str, allow_pull: bool) -> tuple[str, Any, ImageStatus | None]:
    node_id = _node_id()
    set_owner(owner_of(node_id, os.getpid()))
    try:
        client = docker_client()
    except SandboxUnavailableError:
        return node_id, None, None
    try:
        remove_orphans(client, label, node_id)
    except Exception:  # best effort: a later task, or the run's end, removes them
        pass
    return node_id, client, check_image(client, spec, allow_pull)


def owner_of(node_id: str, pid: int) -> str:
    """The owner label of the containers a Ray worker starts: its node, pid and process start time."""
    return f"ray/{node_id}/{pid}/{start_time(pid)}"


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the pid, it tells a
    process apart from a later one that got the same pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def remove_orphans(client: Any, label: str, node_id: str) -> int:
    """Remove the run's containers on this daemon whose owning Ray worker is gone; live work is left alone."""
    import docker.errors
    import ray

    alive_nodes: set[str] | None = None
    removed = 0
    # Sparse: the listing's own labels, no inspection of each container (which may be gone by then).
    for container in client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL_RUN}={label}"}):
        parts = (container.attrs.get("Labels") or {}).get(LABEL_OWNER, "").split("/")
        if len(parts) != 4 or parts[0] != "ray":
            continue  # not started by a Ray task: only a resumed run's cleanup removes it
        _, owner_node, pid, started = parts
        if owner_node == node_id:
            gone = start_time(int(pid)) != started  # no such process now, or another one under its pid
        else:
            if alive_nodes is None:
                alive_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
            gone = owner_node not in alive_nodes
        if gone:
            try:
                container.remove(force=True, v=True)
                removed += 1
            except docker.errors.NotFound:
                pass
    return removed
