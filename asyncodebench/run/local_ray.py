"""Ray nodes of one's own on a shared machine: a throwaway cluster on this machine's loopback for tests and benchmarks
of the Ray executor (`LocalCluster`), and the parts `scripts/ray_cluster.py` starts and stops a user's nodes with.

Each node is one `ray start --block` process in a session of its own, so everything the node runs (raylet, agents,
worker processes) can be found by session id and killed together: `kill` is a node dying, and `stop` ends only
this cluster, never another one on the machine (unlike `ray stop`, which ends every Ray of the machine). Test nodes
listen on 127.0.0.2: Ray rewrites 127.0.0.1 and `localhost` to the machine's outward address, while any other
loopback address is kept as given.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODE_IP = "127.0.0.2"
# Notice a dead node within a few seconds (the defaults take about half a minute).
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                      "RAY_health_check_failure_threshold": "3", "RAY_USAGE_STATS_ENABLED": "0"}


class ClusterError(RuntimeError):
    """A node did not start."""


def ray_start(name: str, temp_dir: Path, args: list[str]) -> list[str]:
    """The command of one node: `ray start --block`, named, with a temp dir of its own (its sockets, logs and the
    head's address file: nodes of one machine never share it)."""
    ray = str(Path(sys.executable).with_name("ray"))
    return [ray, "start", "--block", "--node-name", name, "--temp-dir", str(temp_dir), "--disable-usage-stats", *args]


def session_members(session: int) -> list[int]:
    """Every live process of a session (`ray start` started in a session of its own: the node's processes). Zombies
    do not count: a killed process whose parent died too may wait long for a reaper."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:  # /proc/PID/stat after the command: state, ppid, process group, session, ...
                state, _, _, sid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:4]
            except (OSError, ValueError):
                continue
            if sid == str(session) and state != "Z":
                found.append(int(entry.name))
    return found


def start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (None: no such process): with the pid, it tells the process
    apart from a later one that got the same pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def own_session(leader: int, started: str | None) -> list[int]:
    """The live processes of the session `leader` started at `started`. While any of them lives, Linux gives no
    new process the leader's pid; a leader pid that is alive with another start time is someone else's now."""
    now = start_time(leader)
    if now is not None and now != started:
        return []
    return session_members(leader)


def stop_session(leader: int, started: str | None, grace: float) -> bool:
    """End a node started by `ray start --block`: SIGTERM to it (it then stops the processes it started), SIGKILL to
    whatever of its session is left after `grace` seconds. Whether anything of it was running."""
    members = own_session(leader, started)
    if not members:
        return False
    if leader in members:  # else its processes lost their keeper: nothing would stop them gracefully
        os.kill(leader, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while own_session(leader, started) and time.monotonic() < deadline:
            time.sleep(0.2)
    for _ in range(50):  # SIGKILL what is left, until nothing is (a dying process may still start a child)
        left = own_session(leader, started)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return True


@dataclass
class Node:
    """One node of the cluster: its `ray start` command, environment and log, and its process once started."""

    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def processes(self) -> list[int]:
        """Every live process of the node: the members of its session."""
        return [] if self.process is None else session_members(self.process.pid)

    def start(self, extra_env: dict[str, str] | None = None) -> None:
        """Start `ray start --block` in a session of its own, its output in a fresh log (readiness is read there)."""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            env={**os.environ, **(extra_env or {}), **self.env})

    def wait(self, ready: Any, timeout: float) -> None:
        """Wait until `ready()` holds.

        Raises:
            ClusterError: the node exited or `timeout` seconds passed first (with the end of its log).
        """
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process is None or self.process.poll() is not None or time.monotonic() > deadline:
                log = self.log.read_text(errors="replace")[-3000:]
                raise ClusterError(f"Ray node {self.name} did not start: {log}")
            time.sleep(0.2)

    def started(self) -> bool:
        """Whether the node has started its Ray runtime (as its log says)."""
        return "Ray runtime started" in self.log.read_text(errors="replace")


class LocalCluster:
    """`with LocalCluster(root) as cluster:` a head (no `docker` resource: it runs no evaluation), then
    `add_worker(...)` for each worker node."""

    def __init__(self, root: Path, object_store_bytes: int = 100_000_000, timeout: float = 120) -> None:
        self.root = root
        self.temp_dir = root / "t0"  # Ray's sockets and logs, one folder per node: short, for 108-byte socket paths
        self.object_store_bytes = object_store_bytes
        self.timeout = timeout
        self.nodes: dict[str, Node] = {}
        self.address = ""

    def __enter__(self) -> LocalCluster:
        self.start_head()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start_head(self, num_cpus: int = 1) -> None:
        """Start the head node and wait until it has written its address (`address`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.temp_dir / "ray_current_cluster").unlink(missing_ok=True)
        head = self._node("head", ["--head", "--port", "0", "--include-dashboard=false", "--num-cpus", str(num_cpus)],
                          {}, self.temp_dir)
        head.start(FAST_HEALTH_CHECKS)
        address_file = self.temp_dir / "ray_current_cluster"
        head.wait(lambda: address_file.exists() and address_file.read_text().strip(), self.timeout)
        self.address = address_file.read_text().strip()

    def add_worker(self, name: str, num_cpus: int = 1, resources: dict[str, float] | None = None,
                   env: dict[str, str] | None = None, wait: bool = True) -> Node:
        """A worker node (running, unless `wait` is false: then `wait_ready`); `env` reaches its worker processes
        (DOCKER_HOST: the node's own Docker daemon). Each node has a temp folder of its own, so several can join
        at once."""
        temp_dir = self.root / f"t{len(self.nodes)}"
        node = self._node(name, ["--address", self.address, "--num-cpus", str(num_cpus),
                                 "--resources", json.dumps(resources or {})], env or {}, temp_dir)
        node.start(FAST_HEALTH_CHECKS)
        if wait:
            node.wait(node.started, self.timeout)
        return node

    def wait_ready(self, *names: str) -> None:
        """Wait until each named node has started its Ray runtime."""
        for name in names:
            self.nodes[name].wait(self.nodes[name].started, self.timeout)

    def node_of(self, pid: int) -> str:
        """The node a process belongs to (a Ray worker's pid, say)."""
        session = os.getsid(pid)
        (name,) = [n for n, node in self.nodes.items() if node.process is not None and node.process.pid == session]
        return name

    def kill(self, name: str) -> None:
        """The node dies: SIGKILL to every one of its processes at once."""
        node = self.nodes[name]
        for pid in node.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if node.process is not None:
            node.process.wait()

    def restart(self, name: str) -> None:
        """Kill the node, then start it again with the same command and wait until it is ready."""
        self.kill(name)
        node = self.nodes[name]
        node.start(FAST_HEALTH_CHECKS)
        node.wait(node.started, self.timeout)

    def stop(self) -> None:
        """Kill every node of this cluster, the last started first."""
        for name in reversed(list(self.nodes)):
            self.kill(name)

    def _node(self, name: str, args: list[str], env: dict[str, str], temp_dir: Path) -> Node:
        command = ray_start(name, temp_dir, ["--node-ip-address", NODE_IP,
                                             "--object-store-memory", str(self.object_store_bytes), *args])
        node = Node(name, command, env, self.root / f"{name}.log")
        self.nodes[name] = node
        return node
