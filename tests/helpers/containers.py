"""A run's own containers: found by the label evaluate.py gives them, and read from their cgroup counters."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

RUN_LABEL = "org.asyncodebench.run_id"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def run_containers(run_id: str, docker_host: str | None = None) -> list[str]:
    """Ids of the containers (running or not) of runs with this run id: labelled `<run id>-<8 hex>` (the key of one
    run folder, as evaluate.py labels them) or exactly `<run id>` (scripts that label with the plain id)."""
    env = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
    done = subprocess.run(["docker", "ps", "-a", "--filter", f"label={RUN_LABEL}",
                           "--format", f'{{{{.ID}}}} {{{{.Label "{RUN_LABEL}"}}}}'],
                          capture_output=True, text=True, check=True, env=env)
    pattern = re.compile(re.escape(run_id) + r"(-[0-9a-f]{8})?")
    return [line.split(" ", 1)[0] for line in done.stdout.splitlines()
            if " " in line and pattern.fullmatch(line.split(" ", 1)[1])]


def container_cgroup_value(container_id: str, controller: str, names: tuple[str, ...]) -> int | None:
    """A counter of one container's cgroup (cgroup v1 or v2, cgroupfs or systemd driver), or None when gone."""
    folders = (CGROUP_ROOT / controller / "docker" / container_id, CGROUP_ROOT / "docker" / container_id,
               CGROUP_ROOT / "system.slice" / f"docker-{container_id}.scope")
    for folder in folders:
        for name in names:
            try:
                return int((folder / name).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return None
