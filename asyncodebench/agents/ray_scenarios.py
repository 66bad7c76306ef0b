"""Agent scenarios on a Ray cluster (`run_agents.py --executor ray`): each scenario is one Ray task on a node that
offers the `docker` resource, running the very `scenario_run.run_one` of the local executor against that node's Docker
daemon, in a temporary folder of the node. The task returns the scenario's prediction line and the files of its
scenario folder (trajectories, patches) as data; the driver alone writes them into the run folder, the prediction
last, so the run folder's lock, settings check and resume work as with the local executor.

What the nodes share with `evaluate.py`'s Ray executor (`run.ray_node`): a node with other kit code than the
driver's refuses the work (`kit_problem`); the containers a task starts carry the run's label and their owner (the
node and worker process), and a task first removes what dead attempts of the run left on its daemon; the run's start,
its end and Ctrl-C remove the run's containers on every Docker node (`cleanup_task`; Ctrl-C leaves a stop marker
first, so tasks not started yet return at once).

The model endpoint must be reachable from every node: the agents' loops (and the relay of in-container agents) run
on the nodes. The scripted server listens on 127.0.0.1 of the driver's machine, which only nodes on that machine
reach.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from asyncodebench.agents import runfolder
from asyncodebench.agents.scenario_run import RunnerConfig, run_one
from asyncodebench.agents.team import Scenario
from asyncodebench.dataset.protocols import ONE_AT_A_TIME_PROTOCOLS
from asyncodebench.files import write_atomic
from asyncodebench.harness.sandbox import SandboxUnavailableError, docker_client, set_owner
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.digests import MATCH
from asyncodebench.run import ray_node
from asyncodebench.run.ray_executor import CLEANUP_TIMEOUT_SECONDS, DOCKER_RESOURCE, DOCKER_SHARE, RAY_RETRIES
from asyncodebench.run.work import TRIES, check_image

FILES_CAP_BYTES = 256_000_000  # a scenario's files a task carries back; beyond, files are cut (marked)
CUT_MARK = b"\n[asyncodebench: cut here, the scenario's files exceeded the Ray executor's limit]\n"
WAIT_SECONDS = 1.0


@dataclass(frozen=True)
class ScenarioResult:
    """What one attempt of a scenario did on its node: the prediction line and the scenario folder's files (paths
    relative to it), or `problem`, an infrastructure failure of this node worth another try elsewhere."""

    node_id: str
    line: dict[str, Any] | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    problem: str | None = None


def containers_at_once(scenario: Scenario) -> int:
    """The containers a scenario runs at the same time: one agent's for the serial protocols; otherwise one per
    specialist and the integration's (the online manager merges while others still work)."""
    if scenario.protocol in ONE_AT_A_TIME_PROTOCOLS:
        return 1
    return len(scenario.row["assignments"]) + 1


# --- on the node -------------------------------------------------------------------------------------------------


def scenario_task(config: RunnerConfig, scenario: Scenario, overlays: dict[str, bytes], driver_kit: str,
                  session: str) -> ScenarioResult:
    """A Ray task: run one scenario on this node's Docker daemon; return its prediction and files."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    if refused := ray_node.refusal(config.container_key, session, driver_kit):
        return ScenarioResult(node_id, problem=refused[1])
    set_owner(ray_node.owner_of(node_id, os.getpid()))
    try:
        client = docker_client()
    except SandboxUnavailableError as exc:
        return ScenarioResult(node_id, problem=f"this node's Docker daemon is not reachable: {exc}")
    try:
        ray_node.remove_orphans(client, config.container_key, node_id)
    except Exception:  # best effort: the run's end removes them
        pass
    image = check_image(client, scenario.spec, allow_pull=config.allow_pull)
    if image.state != MATCH:
        return ScenarioResult(node_id, problem=f"image {scenario.spec.pinned_ref} is {image.state} on this node: "
                                               f"{image.detail}")
    with tempfile.TemporaryDirectory(prefix="asyncodebench-agents-") as temp:
        here = replace(config, run_dir=Path(temp), max_workers=1)
        try:
            line = run_one(client, here, scenario, overlays)
        except SandboxUnavailableError as exc:
            return ScenarioResult(node_id, problem=f"the container engine failed: {exc}")
        folder = runfolder.scenario_folder(Path(temp), scenario.row["scenario_id"])
        return ScenarioResult(node_id, line, collect(folder))


def collect(folder: Path, cap: int = FILES_CAP_BYTES) -> dict[str, bytes]:
    """Every file of a scenario folder but its prediction, by relative path, `cap` bytes in all: a file that does
    not fit is cut at its last whole line within what is left, and marked."""
    files: dict[str, bytes] = {}
    left = cap
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != runfolder.RECORD):
        data = path.read_bytes()
        if len(data) > left:
            kept = data[:max(0, left - len(CUT_MARK))]
            data = kept[:kept.rfind(b"\n") + 1] + CUT_MARK
        left = max(0, left - len(data))
        files[path.relative_to(folder).as_posix()] = data
    return files


# --- on the driver -----------------------------------------------------------------------------------------------


def store_result(run_dir: Path, result: ScenarioResult) -> dict[str, Any]:
    """Write a returned scenario into the run folder: its files, then its prediction (the scenario is then done).

    Raises:
        ValueError: a file name leaves the scenario folder.
    """
    assert result.line is not None
    folder = runfolder.scenario_folder(run_dir, result.line["runner"]["scenario_id"])
    for name, data in result.files.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise ValueError(f"a node returned the file {name!r}, outside the scenario folder")
        path = folder.joinpath(*relative.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    runfolder.write_prediction(run_dir, result.line)
    return result.line


@dataclass
class _Attempts:
    scenario: Scenario
    request: dict[str, float]
    failures: list[str] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)


class ScenarioCluster:
    """The driver's side: connect, clean the run's leftovers on every Docker node, run scenarios as tasks."""

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.session = uuid.uuid4().hex[:16]
        self.remote: dict[str, Any] = {}

    def connect(self) -> str | None:
        """Connect to the cluster; None, or why it cannot run scenarios."""
        import logging

        import ray

        from asyncodebench.run.ray_executor import _check_reachable

        address = self.config.ray_address or "auto"
        try:
            if not ray.is_initialized():
                _check_reachable(address)
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except Exception as exc:
            return (f"could not connect to the Ray cluster at {address}: {' '.join(str(exc).split())[:500]}; start "
                    "one (`ray start --head`, see docs/ray.md) or give its address with --ray-address")
        self.remote = {"scenario": ray.remote(scenario_task), "cleanup": ray.remote(ray_node.cleanup_task)}
        return None

    def request(self, scenario: Scenario) -> dict[str, float]:
        """What a scenario's task needs on one node: the CPUs and memory of its containers at once."""
        from docker.utils import parse_bytes

        limits, containers = self.config.settings.limits, containers_at_once(scenario)
        return {"CPU": containers * limits.cpus, "memory": float(containers * parse_bytes(limits.memory)),
                DOCKER_RESOURCE: DOCKER_SHARE}

    def nodes(self, request: dict[str, float]) -> list[str]:
        """Live nodes whose totals can hold `request`."""
        import ray

        return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and
                      all(n["Resources"].get(k, 0) >= v for k, v in request.items()))

    def cleanup(self, stop: bool = False) -> int:
        """Remove the run's containers on every live Docker node (with `stop`, leave this session's stop marker
        first; without, remove the run's markers). The containers removed."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        refs = [self.remote["cleanup"].options(
            num_cpus=0, resources={DOCKER_RESOURCE: DOCKER_SHARE}, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
                self.config.container_key, self.session if stop else None)
            for node in self.nodes({DOCKER_RESOURCE: DOCKER_SHARE})]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=CLEANUP_TIMEOUT_SECONDS)
        removed = 0
        for ref in ready:
            try:
                removed += ray.get(ref).removed  # ray_node.Sweep
            except Exception:  # that node died meanwhile; a later start of the run cleans its daemon
                pass
        return removed

    def run(self, scenarios: list[Scenario], overlays: Callable[[TaskSpec], dict[str, bytes]],
            done: Callable[[Scenario, ScenarioResult], None], failed: Callable[[Scenario, str], None]) -> None:
        """Run every scenario, `max_workers` at a time, each tried again on another node after an infrastructure
        failure there (`TRIES` in all). `done` and `failed` are called once per scenario, in this thread."""
        import ray

        kit = ray_node.kit_fingerprint()
        attempts = {s.row["scenario_id"]: _Attempts(s, self.request(s)) for s in scenarios}
        for item in list(attempts.values()):
            if not self.nodes(item.request):
                failed(item.scenario, f"no live node of the Ray cluster can run it, which needs {item.request}; the "
                                      f"`{DOCKER_RESOURCE}` resource marks nodes with a Docker Engine (ray start ... "
                                      f"--resources '{{\"{DOCKER_RESOURCE}\": 1}}'): add such nodes, or lower --cpus "
                                      "/ --memory")
                del attempts[item.scenario.row["scenario_id"]]
        payloads = {key: ray.put(overlays(item.scenario.spec)) for key, item in attempts.items()}
        queue = list(attempts)
        cap = self.config.max_workers
        in_flight: dict[Any, str] = {}
        try:
            while queue or in_flight:
                while queue and len(in_flight) < cap:
                    key = queue.pop(0)
                    in_flight[self._submit(attempts[key], payloads[key], kit)] = key
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_SECONDS)
                if not ready:
                    continue
                key = in_flight.pop(ready[0])
                item = attempts[key]
                result, final = self._result(ready[0], item)
                if result is not None and result.line is not None:
                    done(item.scenario, result)
                elif final or len(item.failures) >= TRIES:
                    failed(item.scenario, "; ".join(item.failures))
                else:
                    print(f"trying {key} again elsewhere: {item.failures[-1]}", file=sys.stderr)
                    in_flight[self._submit(item, payloads[key], kit)] = key
        except KeyboardInterrupt:
            self.cleanup(stop=True)
            ray.wait(list(in_flight), num_returns=len(in_flight), timeout=CLEANUP_TIMEOUT_SECONDS)
            self.cleanup()
            raise

    def _submit(self, item: _Attempts, overlays: Any, kit: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options: dict[str, Any] = {}
        fresh = [n for n in self.nodes(item.request) if n not in item.tried] if item.tried else []
        if fresh:  # soft: should that node go away, Ray places the attempt elsewhere
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(random.choice(fresh), soft=True)
        custom = {k: v for k, v in item.request.items() if k not in ("CPU", "memory")}
        return self.remote["scenario"].options(
            num_cpus=item.request["CPU"], memory=int(item.request["memory"]), resources=custom,
            max_retries=RAY_RETRIES, retry_exceptions=False, **options).remote(
                self.config, item.scenario, overlays, kit, self.session)

    def _result(self, ref: Any, item: _Attempts) -> tuple[ScenarioResult | None, bool]:
        """The attempt's result (None: it gave none, the failure noted) and whether another try would only repeat
        the failure (the kit's code raised on the node)."""
        import ray
        from ray.exceptions import RayTaskError

        try:
            result: ScenarioResult = ray.get(ref)
        except RayTaskError as exc:
            item.failures.append(f"the task raised: {' '.join(str(exc).split())[-3000:]}")
            return None, True
        except Exception as exc:  # its worker or node died beyond Ray's own re-runs
            item.failures.append(f"Ray lost the attempt ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})")
            return None, False
        if result.problem is not None:
            item.failures.append(f"on node {result.node_id[:12]}: {result.problem}")
            item.tried.add(result.node_id)
        return result, False


def run_scenarios(config: RunnerConfig, scenarios: list[Scenario], overlays: Callable[[TaskSpec], dict[str, bytes]],
                  failed: dict[str, str]) -> None:
    """Run `scenarios` on the cluster at `config.ray_address` into the run folder `config.run_dir`: the run's
    leftovers removed from every Docker node first and at the end; each failed scenario (infrastructure) noted in
    `failed` with why, and left unfinished."""
    cluster = ScenarioCluster(config)

    def fail(scenario: Scenario, why: str) -> None:
        failed[scenario.row["scenario_id"]] = why
        print(f"infrastructure error, not finished: {scenario.row['scenario_id']}: {why}", file=sys.stderr)

    if problem := cluster.connect():
        for scenario in scenarios:
            fail(scenario, problem)
        return

    def finish(scenario: Scenario, result: ScenarioResult) -> None:
        try:
            store_result(config.run_dir, result)
        except ValueError as exc:
            fail(scenario, str(exc))
            return
        if result.line is not None and result.line["runner"].get("valid", True) is False:
            print(f"invalid, not a result: {scenario.row['scenario_id']}: {runfolder.invalid_reasons(result.line)}",
                  file=sys.stderr)
        else:
            print(f"done: {scenario.row['scenario_id']}", file=sys.stderr)

    # The run folder is locked: nothing of this run runs now, whatever of it a node's daemon holds is left over.
    cluster.cleanup()
    cluster.run(scenarios, overlays, finish, fail)
    cluster.cleanup()
