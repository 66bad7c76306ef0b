"""The Ray executor: one Ray task per prediction (and per base state), on the nodes of a Ray cluster.

Nodes that may run evaluations offer the custom resource `docker` (`ray start ... --resources '{"docker": 1}'`):
each has a Docker Engine, the images (or a registry to pull them from by digest) and the kit installed. A task asks
for the CPUs and memory of the containers it runs at once (`STEPS_AT_ONCE` times the container limits), so Ray never
puts more containers on a node than it can hold. The driver needs no Docker: it only submits tasks and writes the
run folder from what they return (`ray_node.NodeResult`).

Faults. A task whose worker process or node dies is re-run by Ray (`RAY_RETRIES`). A task that comes back with an
infrastructure failure of its node (daemon gone, image missing or with another digest there, another kit than the
driver's) is tried again on a node it has not failed on, `TRIES` attempts in all, after which it is recorded as an
infrastructure error naming every node and what went wrong there. Each prediction's outcome is recorded once, by
the driver, whatever the number of attempts. A node that dies mid-run is said on stderr with the work that moved,
and its containers are swept through the live nodes (`ray_watch`). Ctrl-C stops the run on every node (see
`ray_node`: a stop marker, and the run's containers removed), waits briefly for the tasks to return and sweeps the
nodes once more, which also removes the stop markers.
"""

from __future__ import annotations

import importlib.util
import logging
import random
import socket
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.evaluation import STEPS_AT_ONCE
from asyncodebench.images.digests import MATCH, ImageStatus
from asyncodebench.run import ray_node
from asyncodebench.run.config import RunConfig, RunState
from asyncodebench.run.prediction_result import InfrastructureKind
from asyncodebench.run.ray_node import NodeResult, Sweep
from asyncodebench.run.ray_watch import NodeWatch
from asyncodebench.run.results import infrastructure_result
from asyncodebench.run.work import (
    TRIES,
    Job,
    Outcome,
    Record,
    attempts_failed,
    base_state_named,
    prediction_named,
    say_retry,
)

DOCKER_RESOURCE = "docker"  # offered by the nodes that have a Docker Engine; every task asks for a sliver of it
DOCKER_SHARE = 0.001
RAY_RETRIES = 2  # Ray's own re-runs of an attempt whose worker process or node died
NO_NODE_GRACE_SECONDS = 120  # how long work waits for a node able to run it (one may be restarting)
WAIT_SECONDS = 1.0
CLEANUP_TIMEOUT_SECONDS = 60
CONNECT_TIMEOUT_SECONDS = 10


def _check_reachable(address: str) -> None:
    """Fail fast on a head that does not answer: `ray.init` would retry for minutes.

    Raises:
        ConnectionError: nothing listens at HOST:PORT.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_SECONDS).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc})") from exc


def ray_available() -> bool:
    """Whether Ray (an optional extra) is installed."""
    return importlib.util.find_spec("ray") is not None


@dataclass
class _Work:
    """One piece of work for the cluster (a prediction or a base state) and its failed attempts so far."""

    submit: Callable[[dict[str, Any]], Any]  # scheduling options -> the attempt's object ref
    request: dict[str, float]  # the resources it needs on one node (Ray's names: CPU, memory, custom ones)
    what: str  # for people: "line 3 (task)", "the base state of task"
    who: str  # the same with the model and protocol of a prediction, for the line that says a node died
    failures: list[tuple[InfrastructureKind, str]] = field(default_factory=list)  # (kind, "on node X: what went wrong")
    tried: set[str] = field(default_factory=set)  # nodes it failed on
    final: bool = False  # a failure that another try would only repeat

    @property
    def exhausted(self) -> bool:
        return self.final or len(self.failures) >= TRIES

    def failed(self) -> tuple[InfrastructureKind, str]:
        """The infrastructure error it ends with: the last failure's kind, and every failure."""
        return self.failures[-1][0], attempts_failed([text for _, text in self.failures])


class RayExecutor:
    """Runs the jobs as Ray tasks on the cluster at `config.ray_address`."""

    def __init__(self, config: RunConfig, state: RunState) -> None:
        self.config, self.state = config, state
        self.nodes: dict[str, dict[str, Any]] = {}  # node id -> its ray.nodes() entry, refreshed when looked at
        self.tasks: dict[str, Any] = {}  # the Ray remote functions, made once connected
        self.images: dict[str, dict[str, ImageStatus]] = {}  # task -> node -> its pinned image as found there
        self.session = uuid.uuid4().hex[:16]  # names this driver's stop markers on the nodes
        self.watch: NodeWatch | None = None  # set once connected
        self.names: dict[str, str] = {}  # Ray task id (hex) of each attempt submitted -> how messages name its work

    # --- the Executor protocol ---------------------------------------------------------------------------------

    def open(self, task_ids: set[str]) -> tuple[InfrastructureKind, str] | None:
        """See `Executor.open`: connect to the cluster, check that a node can evaluate, clear this run's leftovers."""
        import ray

        address = self.config.ray_address or "auto"
        try:
            if not ray.is_initialized():
                _check_reachable(address)
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except Exception as exc:  # ConnectionError, or whatever Ray raises for a bad address
            return "ray_unavailable", (
                f"could not connect to the Ray cluster at {address}: {' '.join(str(exc).split())[:500]}; start one "
                "(`ray start --head`, see docs/ray.md) or give its address with --ray-address")
        self.tasks = {name: ray.remote(fn) for name, fn in (
            ("evaluate", ray_node.evaluate_task), ("baseline", ray_node.baseline_task),
            ("cleanup", ray_node.cleanup_task), ("sweep", ray_node.sweep_task))}
        request = self._request(STEPS_AT_ONCE)
        if not self._feasible_nodes(request):
            return "ray_no_node", (
                f"no live node of the Ray cluster at {address} can run an evaluation, which needs {request}; the "
                f"`{DOCKER_RESOURCE}` resource marks the nodes with a Docker Engine (ray start ... --resources "
                f"'{{\"{DOCKER_RESOURCE}\": 1}}'): add such nodes, or lower --cpus / --memory")
        self.watch = NodeWatch(self.config.label, self.session, self._marker(), {DOCKER_RESOURCE: DOCKER_SHARE},
                               self._sweep, self.names)
        # nothing of this run is running now: whatever of it a node's daemon holds is left over
        self.watch.begin(self.nodes, self._cleanup_nodes())
        return None

    def measure_baselines(self, overlays: dict[str, dict[str, bytes]]) -> dict[str, BaseStateRecord | str]:
        """See `Executor.measure_baselines`: each task's base state as a Ray task, on whichever node can run it."""
        config, specs = self.config, self.state.specs
        works = {task_id: self._work(base_state_named(task_id), None, "baseline", 1, specs[task_id], config.label,
                                     config.settings, task_overlays, config.pull, ray_node.kit_fingerprint(),
                                     self.session)
                 for task_id, task_overlays in overlays.items()}
        records: dict[str, BaseStateRecord | str] = {}

        def finish(task_id: str, result: NodeResult | None) -> None:
            if result is not None and result.baseline is not None:
                records[task_id] = result.baseline
            else:
                records[task_id] = f"the base state could not be evaluated: {works[task_id].failed()[1]}"

        self._drive(works, finish)
        return records

    def evaluate(self, jobs: list[Job], record: Record) -> None:
        """See `Executor.evaluate`: each job as a Ray task, tried again elsewhere after an infrastructure failure."""
        by_line = {job.prediction.line: job for job in jobs}
        kit = ray_node.kit_fingerprint()
        works = {line: self._work(prediction_named(job.prediction), _named_fully(job), "evaluate", STEPS_AT_ONCE,
                                  job, self.config.pull, kit, self.session)
                 for line, job in by_line.items()}

        def finish(line: int, result: NodeResult | None) -> None:
            job = by_line[line]
            if result is not None and result.outcome is not None:
                record(job, result.outcome)
            else:
                record(job, Outcome(infrastructure_result(job.prediction, *works[line].failed())))

        self._drive(works, finish)

    def close(self) -> None:
        """See `Executor.close`: remove the run's volumes, and containers dead workers left, on every node; say
        which dead nodes may still hold containers of the run."""
        import ray

        if self.watch is None:
            return
        if not self.state.stopping.is_set():
            self.watch.settle(lambda: {n["NodeID"]: n for n in ray.nodes()})
            # the run's volumes, and containers a dead worker left on a live node's daemon
            self.watch.finish(self._cleanup_nodes(), CLEANUP_TIMEOUT_SECONDS)
        self.watch.forget()

    # --- driving the cluster -----------------------------------------------------------------------------------

    def _drive(self, works: dict[Any, _Work], finish: Callable[[Any, NodeResult | None], None]) -> None:
        """Run every piece of work to its end, trying infrastructure failures again elsewhere; `finish` is called
        once per piece, in this thread (None: it failed). Ctrl-C stops the run on every node and raises."""
        import ray

        queue = list(works)
        cap = self.config.max_workers or len(queue)
        in_flight: dict[Any, Any] = {}  # attempt's object ref -> key of its work
        watch = _StuckWatch()
        try:
            while queue or in_flight:
                while queue and len(in_flight) < cap:
                    key = queue.pop(0)
                    in_flight[self._attempt(works[key])] = key
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_SECONDS)
                if self.watch is not None and self.watch.due():
                    self.watch.look({n["NodeID"]: n for n in ray.nodes()}, lambda: self._running(in_flight))
                if not ready:
                    for ref in watch.given_up(self, works, in_flight):
                        ray.cancel(ref, force=True)
                        finish(in_flight.pop(ref), None)
                    continue
                key = in_flight.pop(ready[0])
                result = self._result(ready[0], works[key])
                if result is None or result.problem is not None:
                    if not works[key].exhausted:
                        say_retry(works[key].what, [text for _, text in works[key].failures])
                        in_flight[self._attempt(works[key])] = key
                        continue
                    result = None
                finish(key, result)
        except KeyboardInterrupt:
            self.state.stopping.set()
            # Not ray.cancel: cancelling a task just as it completes can crash the driver (a Ray bug). Tasks yet to
            # start see the stop marker and return; running steps fail fast once their containers are gone.
            self._cleanup_nodes(stop=True)
            ray.wait(list(in_flight), num_returns=len(in_flight), timeout=CLEANUP_TIMEOUT_SECONDS)
            # What a step started while the first sweep ran, and the stop markers: the tasks have returned, and any
            # that has not is ended by Ray as this driver exits (Ray ends a job's tasks, pending ones too, then).
            self._cleanup_nodes()
            if self.watch is not None:
                self.watch.forget()
            raise

    def _running(self, in_flight: dict[Any, Any]) -> set[str]:
        """The Ray task ids (hex) of the attempts in flight that have not returned."""
        import ray

        if not in_flight:
            return set()
        done, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0, fetch_local=False)
        returned = set(done)
        return {ref.task_id().hex() for ref in in_flight if ref not in returned}

    def _work(self, what: str, who: str | None, task: str, containers: int, *args: Any) -> _Work:
        request = self._request(containers)
        custom = {k: v for k, v in request.items() if k not in ("CPU", "memory")}
        remote = self.tasks[task]

        def submit(options: dict[str, Any]) -> Any:
            return remote.options(num_cpus=request["CPU"], memory=int(request["memory"]), resources=custom,
                                  max_retries=RAY_RETRIES, retry_exceptions=False, **options).remote(*args)

        return _Work(submit, request, what, who or what)

    def _attempt(self, work: _Work) -> Any:
        """Submit one attempt, on a node the work has not failed on when there is one (else where Ray likes)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options: dict[str, Any] = {}
        if work.tried:
            fresh = [n for n in self._feasible_nodes(work.request) if n not in work.tried]
            if fresh:  # soft: should that node go away, Ray places the attempt elsewhere
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(random.choice(fresh), soft=True)
        ref = work.submit(options)
        self.names[ref.task_id().hex()] = work.who
        return ref

    def _result(self, ref: Any, work: _Work) -> NodeResult | None:
        """The attempt's result, its failure noted in `work`; None when the attempt gave no result at all."""
        import ray
        from ray.exceptions import RayTaskError

        try:
            result: NodeResult = ray.get(ref)
        except RayTaskError as exc:  # the kit's own code raised on the node: a bug, the same anywhere
            work.failures.append(("harness_error", f"the task raised: {' '.join(str(exc).split())[-3000:]}"))
            work.final = True
            return None
        except Exception as exc:  # its worker or node died beyond Ray's own re-runs, its result was lost, ...
            work.failures.append(("node_lost", f"Ray lost the attempt ({type(exc).__name__}: "
                                               f"{' '.join(str(exc).split())[:300]})"))
            return None
        if result.image is not None:
            self._note_image(result.node_id, result.image)
        if result.problem is not None:
            work.failures.append((result.problem[0], f"on node {self._describe(result.node_id)}: {result.problem[1]}"))
            work.tried.add(result.node_id)
        return result

    def _cleanup_nodes(self, stop: bool = False) -> dict[str, Sweep]:
        """Remove the run's containers and volumes from the daemon of every live node the run may use (the Docker
        nodes that offer the run's --ray-resources); with `stop`, leave this session's stop marker there first,
        else remove the run's stop markers. What each node's cleanup did, by node id."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        marker = self._marker()
        refs = {self.tasks["cleanup"].options(
            num_cpus=0, resources=marker, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote(
                self.config.label, self.session if stop else None): node_id
            for node_id in self._feasible_nodes(marker)}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=CLEANUP_TIMEOUT_SECONDS)
        sweeps = {}
        for ref in ready:
            try:
                sweeps[refs[ref]] = ray.get(ref)
            except Exception:  # that node died meanwhile: its daemon is cleaned when the run is resumed there
                pass
        return sweeps

    def _sweep(self, node_id: str) -> Any:
        """Submit a sweep of the run's containers whose owner is gone, on that node (any node with a daemon: it may
        share a dead node's daemon)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self.tasks["sweep"].options(
            num_cpus=0, resources={DOCKER_RESOURCE: DOCKER_SHARE}, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote(self.config.label)

    def _marker(self) -> dict[str, float]:
        """The resources of a node the run may use: the Docker marker and the run's --ray-resources."""
        return {DOCKER_RESOURCE: DOCKER_SHARE, **dict(self.config.ray_resources)}

    # --- resources, nodes, images ------------------------------------------------------------------------------

    def _request(self, containers: int) -> dict[str, float]:
        """What one task needs on a node: the CPUs and memory of the containers it runs at once, and a sliver of
        the Docker marker (plus any custom resources the run asks for)."""
        from docker.utils import parse_bytes  # as the SDK reads the container's memory limit

        limits = self.config.settings.limits
        return {"CPU": containers * limits.cpus, "memory": float(containers * parse_bytes(limits.memory)),
                DOCKER_RESOURCE: DOCKER_SHARE, **dict(self.config.ray_resources)}

    def _feasible_nodes(self, request: dict[str, float], refresh: bool = True) -> list[str]:
        """Live nodes whose totals can hold `request` (as the cluster is now, or at the last refresh)."""
        import ray

        if refresh or not self.nodes:
            self.nodes = {n["NodeID"]: n for n in ray.nodes()}
        return sorted(node_id for node_id, node in self.nodes.items() if node["Alive"] and
                      all(node["Resources"].get(name, 0) >= amount for name, amount in request.items()))

    def _describe(self, node_id: str) -> str:
        if node_id not in self.nodes:
            self._feasible_nodes({})
        node = self.nodes.get(node_id) or {}
        return f"{node.get('NodeName') or node.get('NodeManagerAddress') or '?'} ({node_id[:12]})"

    def _note_image(self, node_id: str, image: ImageStatus) -> None:
        """The report's status of a task's image: usable when some node had it, with every node that had not
        named in its detail."""
        seen = self.images.setdefault(image.task_id, {})
        seen[node_id] = image
        problems = "; ".join(f"{s.state} on node {self._describe(n)}: {s.detail}" for n, s in seen.items()
                             if s.state != MATCH)
        usable = [s for s in seen.values() if s.state == MATCH]
        if usable:
            self.state.images[image.task_id] = replace(
                usable[0], detail=f"not usable on every node: {problems}" if problems else usable[0].detail)
        else:
            self.state.images[image.task_id] = replace(image, detail=problems)


def _named_fully(job: Job) -> str:
    """A prediction's work as the line that says a node died names it: `line 3 (task, model, protocol)`."""
    prediction = job.prediction
    return f"line {prediction.line} ({prediction.task_id}, {prediction.model}, {prediction.protocol})"


class _StuckWatch:
    """Work that no live node can run waits for one (a node may be restarting), then ends as an infrastructure
    error instead of waiting forever."""

    def __init__(self) -> None:
        self.checked = 0.0
        self.since: float | None = None

    def given_up(self, executor: RayExecutor, works: dict[Any, _Work], in_flight: dict[Any, Any]) -> list[Any]:
        now = time.monotonic()
        if now - self.checked < 5:  # look at the cluster every few seconds, not at every wait
            return []
        self.checked = now
        executor._feasible_nodes({})  # one look at the cluster for all of them
        stuck = [ref for ref, key in in_flight.items()
                 if not executor._feasible_nodes(works[key].request, refresh=False)]
        if not stuck:
            self.since = None
            return []
        self.since = self.since or now
        if now - self.since < NO_NODE_GRACE_SECONDS:
            return []
        self.since = None
        for ref in stuck:
            works[in_flight[ref]].failures.append(
                ("ray_no_node", f"no live node of the cluster could run it for {NO_NODE_GRACE_SECONDS} s"))
        return stuck
