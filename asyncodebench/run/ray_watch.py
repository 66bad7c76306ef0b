"""The Ray executor's watch over the cluster's nodes while a run goes on (`ray_executor` looks between its waits).

A node that was alive and is now dead gets one line on stderr naming it and the run's work that was running there
(Ray runs that work again on a live node), and a sweep task on every live Docker node removes the run's containers
whose owner node is dead: that clears the dead node's daemon at once when a live node shares it. A node that joins
(a restarted node joins under a new id) is swept as it joins, which clears its daemon of what its earlier life left.
At the end of the run, a dead node whose daemon no node has swept since it died may still hold containers of the
run: said on stderr, with what to do. Ray may re-run a dead node's attempt elsewhere, and the run may end, before the
cluster counts the node as dead (some seconds): the end of the run waits for the cluster to decide (`settle`).

Which node an attempt ran on comes from the attempts themselves (`ray_node.note_attempt`, in Ray's key-value
store), and which Docker daemon a node has from the sweeps (`ray_node.Sweep.daemon`), so nothing is guessed from
names or addresses.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from asyncodebench.harness.sandbox import LABEL_RUN
from asyncodebench.run.ray_node import ATTEMPTS_NAMESPACE, Sweep, attempts_prefix
from asyncodebench.untrusted import terminal_text

LOOK_SECONDS = 1.0  # between two looks at the cluster: one small request to Ray's control store
SETTLE_SECONDS = 60  # at most, at the end of a run, for the cluster to say which node died (Ray's defaults: ~30 s)


@dataclass
class DeadNode:
    """A node of the run that died while the run went on."""

    name: str  # as messages name it
    daemon: str | None  # its Docker daemon (`ray_node.daemon_identity`), as a sweep there reported it (None: none did)
    moved: list[str] | None  # the run's work that was running there and went elsewhere (None: it could not be told)
    cleared: bool = False  # a node on the same daemon has swept since it died


def describe(node_id: str, entry: dict[str, Any]) -> str:
    """How messages name a node: `NAME (id prefix)`, and its address when the name is not the address."""
    address = entry.get("NodeManagerAddress") or "?"
    name = entry.get("NodeName") or address
    return f"{name} ({node_id[:12]})" + (f" at {address}" if name != address else "")


def has(entry: dict[str, Any], request: dict[str, float]) -> bool:
    """Whether a node's resources (as it offered them in life) hold `request`."""
    return all(entry.get("Resources", {}).get(name, 0) >= amount for name, amount in request.items())


class NodeWatch:
    """Deaths and arrivals of nodes between two looks at `ray.nodes()`, and the sweeps they call for.

    `serves`: the resources of a node that may run the run's work; `docker`: those of a node with a Docker daemon;
    `sweep(node_id)`: submits a sweep task (`ray_node.sweep_task`) pinned to that node and returns its object ref;
    `names`: the Ray task id (hex) of each attempt the session submitted -> how messages name its work (the executor
    fills it). Sweeps come in by node id (`{node id: Sweep}`).
    """

    def __init__(self, label: str, session: str, serves: dict[str, float], docker: dict[str, float],
                 sweep: Callable[[str], Any], names: dict[str, str]) -> None:
        self.label, self.session, self.serves, self.docker, self.sweep = label, session, serves, docker, sweep
        self.names = names
        self.alive: dict[str, dict[str, Any]] = {}  # node id -> its ray.nodes() entry, as of the last look
        self.daemons: dict[str, str] = {}  # node id -> its Docker daemon (`ray_node.daemon_identity`)
        self.dead: dict[str, DeadNode] = {}
        # a sweep's object ref -> (its node, the dead nodes known when it was sent)
        self.pending: dict[Any, tuple[str, frozenset[str]]] = {}
        self.looked = 0.0

    def begin(self, nodes: dict[str, dict[str, Any]], sweeps: dict[str, Sweep]) -> None:
        """The cluster as the run opens, and what the opening cleanup found on each node."""
        self.alive = {node_id: entry for node_id, entry in nodes.items() if entry["Alive"]}
        self._note(sweeps, frozenset())
        self.looked = time.monotonic()

    def due(self) -> bool:
        """Whether it is time for another look."""
        return time.monotonic() - self.looked >= LOOK_SECONDS

    def look(self, nodes: dict[str, dict[str, Any]], running: Callable[[], set[str]]) -> None:
        """Compare the cluster (`nodes`: a fresh `ray.nodes()` by id) with the last look. `running()`: the Ray task
        ids (hex) of the attempts in flight."""
        self.looked = time.monotonic()
        self._collect()
        now = {node_id: entry for node_id, entry in nodes.items() if entry["Alive"]}
        died = {node_id: entry for node_id, entry in self.alive.items() if node_id not in now}
        joined = [node_id for node_id in now if node_id not in self.alive and has(now[node_id], self.docker)]
        self.alive = now
        died = {node_id: entry for node_id, entry in died.items() if has(entry, self.serves)}
        if died:
            on_node = self._attempts_by_node()
            in_flight = running()
            for node_id, entry in sorted(died.items()):
                moved = None if on_node is None else self._moved(node_id, on_node, in_flight)
                dead = DeadNode(describe(node_id, entry), self.daemons.get(node_id), moved)
                self.dead[node_id] = dead
                _say(f"warning: Ray node {dead.name} died; " + (
                    f"its work in flight goes to another node: {', '.join(moved)}" if moved else
                    "none of this run's work was running there" if moved is not None else
                    "which of this run's work ran there could not be told (Ray's key-value store did not answer)"))
            joined = [node_id for node_id in now if has(now[node_id], self.docker)]  # all of them sweep
        for node_id in joined:
            self.pending[self.sweep(node_id)] = (node_id, frozenset(self.dead))

    def settle(self, nodes: Callable[[], dict[str, dict[str, Any]]], wait: float = SETTLE_SECONDS) -> None:
        """The run's work is done: when Ray re-ran an attempt on another node while both nodes still count as alive,
        one of them has died unseen (or only a worker process did); wait up to `wait` seconds for the cluster to
        decide, then look once more. `nodes()`: a fresh `ray.nodes()` by id."""
        on_node = self._attempts_by_node() or {}
        pairs = set()
        for task in set().union(*on_node.values()):
            holders = frozenset(node_id for node_id, tasks in on_node.items() if task in tasks)
            if len(holders) > 1 and not holders & set(self.dead):
                pairs.add(holders)
        deadline = time.monotonic() + wait
        now = nodes()
        while pairs and time.monotonic() < deadline:
            pairs = {pair for pair in pairs if pair <= {n for n, entry in now.items() if entry["Alive"]}}
            if pairs:
                time.sleep(1)
                now = nodes()
        self.look(now, set)

    def finish(self, sweeps: dict[str, Sweep], timeout: float) -> None:
        """The run ends: take in the sweeps still out and the closing cleanup's (`sweeps`), then say which dead
        nodes may still hold containers of the run."""
        self._collect(timeout)
        self._note(sweeps, frozenset(self.dead))
        for dead in self.dead.values():
            if dead.cleared or dead.moved == []:
                continue  # swept through a node on its daemon, or nothing of the run ran there
            key = f"{LABEL_RUN}={self.label}"
            _say(f"warning: Ray node {dead.name} died during the run and no live node on its Docker daemon has "
                 "swept it since: containers of this run may still run there. Run the same command again once the "
                 "node is back (a finished run then only cleans up), or on that machine: "
                 f"docker rm -f -v $(docker ps -aq --filter label={key}); "
                 f"docker volume rm $(docker volume ls -q --filter label={key})")

    def forget(self) -> None:
        """Remove the session's notes of where its attempts ran (best effort)."""
        from ray.experimental.internal_kv import _internal_kv_del

        try:
            _internal_kv_del(attempts_prefix(self.session), del_by_prefix=True, namespace=ATTEMPTS_NAMESPACE)
        except Exception:  # a head that is gone took them with it
            pass

    def _collect(self, timeout: float = 0) -> None:
        """Take in the sweeps that have returned (waiting up to `timeout` for the others)."""
        import ray

        if not self.pending:
            return
        ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=timeout)
        for ref in ready:
            node_id, known = self.pending.pop(ref)
            try:
                self._note({node_id: ray.get(ref)}, known)
            except Exception:  # that node died meanwhile: its own death is watched for
                pass

    def _note(self, sweeps: dict[str, Sweep], known_dead: frozenset[str]) -> None:
        """Learn each swept node's daemon; a sweep sent after a node died clears that node when on its daemon."""
        for swept, sweep in sweeps.items():
            if sweep.daemon is None:
                continue
            self.daemons[swept] = sweep.daemon
            for node_id in known_dead:
                if self.dead[node_id].daemon == sweep.daemon:
                    self.dead[node_id].cleared = True

    def _moved(self, node_id: str, on_node: dict[str, set[str]], in_flight: set[str]) -> list[str]:
        """How messages name the work whose attempts ran on this node and did not end there: in flight still, or run
        again on another node (Ray re-runs an attempt under its task id)."""
        elsewhere = set().union(*(tasks for other, tasks in on_node.items() if other != node_id))
        moved = [self.names.get(task, task) for task in on_node.get(node_id, set()) if task in in_flight | elsewhere]
        return sorted(set(moved))

    def _attempts_by_node(self) -> dict[str, set[str]] | None:
        """Node id -> the Ray task ids of this session's attempts that started there (None: no answer)."""
        from ray.experimental.internal_kv import _internal_kv_list

        try:
            keys = _internal_kv_list(attempts_prefix(self.session), namespace=ATTEMPTS_NAMESPACE)
        except Exception:
            return None
        found: dict[str, set[str]] = {}
        for key in keys:
            task, _, node_id = key.decode().removeprefix(attempts_prefix(self.session)).partition("/")
            found.setdefault(node_id, set()).add(task)
        return found


def _say(line: str) -> None:
    """One line on stderr, above the progress bar."""
    from tqdm import tqdm

    tqdm.write(terminal_text(line), file=sys.stderr)
