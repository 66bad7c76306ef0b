"""Start, list and stop Ray nodes of your own on a shared machine, for `evaluate.py --executor ray`.

    python scripts/ray_cluster.py start --head --port 6380              # a head (it runs no evaluation)
    python scripts/ray_cluster.py start --address HEAD:6380 --docker    # a node that evaluates (its Docker Engine)
    python scripts/ray_cluster.py status                                # the nodes started from --dir, and the address
    python scripts/ray_cluster.py stop                                  # those nodes, and nothing else

`ray stop` ends every Ray process of the machine, other users' clusters too. Here each node is one
`ray start --block` process in a session of its own, with a Ray temp dir of its own under --dir; --dir/nodes.json
records each node's process, so `stop` ends exactly the nodes started from that folder (SIGTERM, which makes Ray
stop the node's processes, then SIGKILL to what is left of its session after --grace seconds). A node uses the
Docker daemon of the environment it is started from (set DOCKER_HOST to pick another). A head without --port takes
a free port: `status` shows its address.

Exit codes:
  0  done (`status`: whatever it found)
  2  bad arguments (neither --head nor --address, a name already running from --dir, bad --resources)
  3  the node did not start (the end of its log is printed)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from asyncodebench import cli

STATE = "nodes.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "status", "stop"])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / f"asyncodebench-ray-{os.getuid()}",
                        help="where the nodes' state, logs and Ray temp dirs live; keep it short, Ray's socket paths "
                             "must fit in 107 bytes (default: %(default)s)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--head", action="store_true", help="start: a head node")
    where.add_argument("--address", metavar="HEAD:PORT", help="start: a worker node joining this head")
    parser.add_argument("--port", type=int, default=0, help="start --head: its port (default: a free one)")
    parser.add_argument("--name", help="start: the node's name, in Ray and in messages (default: HOST-head or "
                                       "HOST-workerN)")
    parser.add_argument("--docker", action="store_true",
                        help="start: offer the `docker` resource (the node evaluates; it needs a Docker Engine)")
    parser.add_argument("--resources", default="{}", metavar="JSON", help="start: more custom resources, as Ray's")
    parser.add_argument("--num-cpus", type=cli.positive_int, help="start: the CPUs the node offers (default: all)")
    parser.add_argument("--node-ip-address", help="start: the address the node listens on (default: Ray's choice)")
    parser.add_argument("--timeout", type=cli.positive_seconds, default=120, help="start: seconds to wait for it")
    parser.add_argument("--grace", type=cli.positive_seconds, default=30,
                        help="stop: seconds a node has to stop before what is left of it is killed")
    args = parser.parse_args(argv)
    if args.action == "start" and not (args.head or args.address):
        parser.error("start needs --head, or --address HEAD:PORT of the head to join")
    try:
        resources = json.loads(args.resources)
    except ValueError:
        resources = None
    if not isinstance(resources, dict):
        parser.error(f"--resources takes a JSON object such as '{{\"pool_a\": 1}}', not {args.resources!r}")
    args.resources = resources
    return args


def load(folder: Path) -> list[dict[str, Any]]:
    path = folder / STATE
    return json.loads(path.read_text())["nodes"] if path.exists() else []


def save(folder: Path, nodes: list[dict[str, Any]]) -> None:
    path = folder / STATE
    path.with_suffix(".tmp").write_text(json.dumps({"nodes": nodes}, indent=2) + "\n")
    path.with_suffix(".tmp").replace(path)


def running(node: dict[str, Any]) -> bool:
    from asyncodebench.run.local_ray import own_session

    return bool(own_session(node["pid"], node["started"]))


def start(args: argparse.Namespace, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Start one node in the background and wait until it runs; its record."""
    from asyncodebench.run.local_ray import ClusterError, Node, ray_start, start_time, stop_session

    kind = "head" if args.head else f"worker{sum(not n['head'] for n in nodes) + 1}"
    name = args.name or f"{socket.gethostname()}-{kind}"
    if any(n["name"] == name and running(n) for n in nodes):
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"{name} already runs from {args.dir}: stop it first, or give --name")
    used = {n["temp_dir"] for n in nodes}
    temp_dir = next(args.dir / f"t{i}" for i in range(len(nodes) + 1) if str(args.dir / f"t{i}") not in used)
    resources = {**({"docker": 1} if args.docker else {}), **args.resources}
    options = ["--head", "--port", str(args.port), "--include-dashboard=false"] if args.head else \
        ["--address", args.address]
    options += ["--resources", json.dumps(resources)]
    options += ["--num-cpus", str(args.num_cpus)] if args.num_cpus else []
    options += ["--node-ip-address", args.node_ip_address] if args.node_ip_address else []
    node = Node(name, ray_start(name, temp_dir, options), {}, args.dir / f"{name}.log")
    address_file = temp_dir / "ray_current_cluster"  # the head writes its address there once it serves
    address_file.unlink(missing_ok=True)

    def ready() -> bool:
        return bool(address_file.exists() and address_file.read_text().strip()) if args.head else node.started()

    node.start()
    assert node.process is not None
    try:
        node.wait(ready, args.timeout)
    except ClusterError as exc:
        stop_session(node.process.pid, start_time(node.process.pid), 5)
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    address = address_file.read_text().strip() if args.head else args.address
    return {"name": name, "head": bool(args.head), "address": address, "pid": node.process.pid,
            "started": start_time(node.process.pid), "temp_dir": str(temp_dir), "log": str(node.log)}


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import fcntl

    from asyncodebench.run.local_ray import stop_session

    args.dir.mkdir(parents=True, exist_ok=True)
    with (args.dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one command at a time on a folder's nodes.json
        nodes = load(args.dir)
        if args.action == "start":
            record = start(args, nodes)
            save(args.dir, [n for n in nodes if n["name"] != record["name"]] + [record])
            print(f"started {record['name']} (pid {record['pid']}, log {record['log']}); cluster address: "
                  f"{record['address']}")
        elif args.action == "status":
            if not nodes:
                print(f"no node started from {args.dir}")
            for node in nodes:
                state = "running" if running(node) else "not running (stop forgets it)"
                print(f"{node['name']}: {state}, {'head' if node['head'] else 'worker'} of {node['address']}, "
                      f"pid {node['pid']}, log {node['log']}")
        else:
            for node in reversed(nodes):  # the workers first, then the head
                ended = stop_session(node["pid"], node["started"], args.grace)
                print(f"{node['name']}: {'stopped' if ended else 'was not running'}")
            save(args.dir, [])
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
