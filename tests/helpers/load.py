"""A loaded machine for a run (busy processes beside it), and a sampler of its containers' processes and memory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers.containers import RUN_LABEL, container_cgroup_value


class CpuLoad:
    """Busy processes beside a run, so that it is tested on a loaded machine: they stop by themselves after
    `seconds` (and when the block ends). They run under SCHED_IDLE: always runnable, so they add their number to
    the run queue (what the load average counts, whatever the priority) and take every moment of CPU the run
    leaves, while the run itself is scheduled first and finishes in reasonable time. No network.

    What they did is measured on them alone, never on the host (other work moves its load average, and a one-minute
    mean lags a short run): how many were runnable at each sample while the block ran (`min_runnable`, the run
    queue they add), whether all lasted to the block's end and the CPU time they took."""

    def __init__(self, processes: int = 24, seconds: int = 900) -> None:
        self.processes, self.seconds = processes, seconds
        self._children: list[subprocess.Popen[bytes]] = []
        self.min_runnable = processes  # the fewest hogs in state R at any sample during the block
        self.alive_at_end = 0  # hogs still running when the block ended: the load lasted the whole block
        self.cpu_seconds = 0.0  # CPU time the hogs took: they competed for the CPU, not slept
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CpuLoad:
        # All on one CPU: the run has the other to itself, and takes this one whenever it wants it.
        cpu = max(os.sched_getaffinity(0))
        code = ("import os, time\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
                f"os.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + {self.seconds}\n"
                "while time.time() < end: pass")
        self._children = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(self.processes)]
        # The block starts once every hog is in its loop (a marker of their own state, not a time).
        while self._runnable() < self.processes and all(c.poll() is None for c in self._children):
            time.sleep(0.05)
        self._sampler.start()
        return self

    def _runnable(self) -> int:
        return sum(1 for child in self._children if child.poll() is None and _state(child.pid) == "R")

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.min_runnable = min(self.min_runnable, self._runnable())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join()
        ticks = os.sysconf("SC_CLK_TCK")
        for child in self._children:
            if child.poll() is None:
                self.alive_at_end += 1
                self.cpu_seconds += _cpu_seconds(child.pid, ticks)
            child.kill()
            child.wait()


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command's parenthesised name (which may hold spaces): the state first."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return ["X"]


def _state(pid: int) -> str:
    return _stat_fields(pid)[0]


def _cpu_seconds(pid: int, ticks: int) -> float:
    """User plus system time of one process, from /proc/PID/stat (fields 14 and 15, after the command's
    parenthesised name, which may hold spaces)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / ticks


class RunSampler:
    """Samples the processes and memory of one run's containers (never the host's: other work shares it) in the
    background while the run goes on. Peaks are what the kernel's counters say, per container."""

    def __init__(self, run_id: str, interval: float = 0.1) -> None:
        import docker

        self.client = docker.from_env()
        self.run_id, self.interval = run_id, interval
        self.max_processes = 0  # in any one container of the run
        self.max_memory = 0  # peak bytes charged to any one container of the run
        self.containers_seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _run_containers(self) -> list[str]:
        listed = self.client.containers.list(sparse=True)
        return [c.id for c in listed if (c.attrs.get("Labels") or {}).get(RUN_LABEL, "").startswith(f"{self.run_id}-")]

    def _loop(self) -> None:
        while not self._stop.is_set():
            for container_id in self._run_containers():
                pids = container_cgroup_value(container_id, "pids", ("pids.current",))
                memory = container_cgroup_value(container_id, "memory", ("memory.max_usage_in_bytes",
                                                                         "memory.peak", "memory.current"))
                if pids is not None:
                    self.containers_seen.add(container_id)
                    self.max_processes = max(self.max_processes, pids)
                self.max_memory = max(self.max_memory, memory or 0)
            time.sleep(self.interval)

    def __enter__(self) -> RunSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
