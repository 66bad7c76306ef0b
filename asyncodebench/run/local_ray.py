"""A throwaway Ray cluster on this machine's loopback, for tests and benchmarks of the Ray executor.

Each node is one `ray start --block` process in a session of its own, so everything the node runs (raylet, agents,
worker processes) can be found by session id and killed together: `kill` is a node dying, and `stop` ends only
this cluster, never another one on the machine (unlike `ray stop`). Nodes listen on 127.0.0.2: Ray rewrites
127.0.0.1 and `localhost` to the machine's outward address, while any other loopback address is kept as given.
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
        if self.process is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getsid(int(entry.name)) == self.process.pid:
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found


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
        self.ray = str(Path(sys.executable).with_name("ray"))

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
        self._start(head)
        address_file = self.temp_dir / "ray_current_cluster"
        self._wait(head, lambda: address_file.exists() and address_file.read_text().strip())
        self.address = address_file.read_text().strip()

    def add_worker(self, name: str, num_cpus: int = 1, resources: dict[str, float] | None = None,
                   env: dict[str, str] | None = None, wait: bool = True) -> Node:
        """A worker node (running, unless `wait` is false: then `wait_ready`); `env` reaches its worker processes
        (DOCKER_HOST: the node's own Docker daemon). Each node has a temp folder of its own, so several can join
        at once."""
        temp_dir = self.root / f"t{len(self.nodes)}"
        node = self._node(name, ["--address", self.address, "--num-cpus", str(num_cpus),
                                 "--resources", json.dumps(resources or {})], env or {}, temp_dir)
        self._start(node)
        if wait:
            self._wait_ready(node)
        return node

    def wait_ready(self, *names: str) -> None:
        """Wait until each named node has started its Ray runtime."""
        for name in names:
            self._wait_ready(self.nodes[name])

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
        self._start(node)
        self._wait_ready(node)

    def stop(self) -> None:
        """Kill every node of this cluster, the last started first."""
        for name in reversed(list(self.nodes)):
            self.kill(name)

    def _node(self, name: str, args: list[str], env: dict[str, str], temp_dir: Path) -> Node:
        command = [self.ray, "start", "--block", "--node-ip-address", NODE_IP, "--node-name", name,
                   "--temp-dir", str(temp_dir), "--object-store-memory", str(self.object_store_bytes),
                   "--disable-usage-stats", *args]
        node = Node(name, command, env, self.root / f"{name}.log")
        self.nodes[name] = node
        return node

    def _start(self, node: Node) -> None:
        with node.log.open("wb") as log:  # a fresh log: readiness is read from it
            node.process = subprocess.Popen(node.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            env={**os.environ, **FAST_HEALTH_CHECKS, **node.env})

    def _wait_ready(self, node: Node) -> None:
        self._wait(node, lambda: "Ray runtime started" in node.log.read_text(errors="replace"))

    def _wait(self, node: Node, ready: Any) -> None:
        deadline = time.monotonic() + self.timeout
        while not ready():
            if node.process is None or node.process.poll() is not None or time.monotonic() > deadline:
                log = node.log.read_text(errors="replace")[-3000:]
                raise ClusterError(f"Ray node {node.name} did not start: {log}")
            time.sleep(0.2)
