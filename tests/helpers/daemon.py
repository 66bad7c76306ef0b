"""A second Docker Engine on this machine, for tests that need a daemon of their own: one they can crash
(test_infrastructure_failures) or one that lacks the demo image (test_ray_executor)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest


class Daemon:
    """A dockerd of our own: separate state, socket and containerd; started and killed by this test only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = f"unix://{root}/docker.sock"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        # After a crash the killed containerd may linger as a zombie under its pid: dockerd would wait for it.
        (self.root / "exec" / "containerd" / "containerd.pid").unlink(missing_ok=True)
        self._drop_torn_volume_options()
        log = (self.root / "dockerd.log").open("ab")
        self.process = subprocess.Popen(
            ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "docker.pid"), "-H", self.host, "--bridge=none", "--iptables=false",
             "--ip6tables=false", "--containerd-namespace", "asyncodebench-test",
             "--containerd-plugins-namespace", "asyncodebench-test-plugins"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while self.docker("info").returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the test dockerd did not start: {(self.root / 'dockerd.log').read_text()[-3000:]}")
            time.sleep(0.2)

    def _drop_torn_volume_options(self) -> None:
        """Docker writes a volume's `opts.json` in place, not atomically: a daemon killed between creating and
        filling it leaves the file empty, and the restarted daemon then refuses to start ("unexpected end of JSON
        input"). The test kills the daemon on purpose, so it mends what the kill tore: an options file that is not
        JSON is removed (the volume then loads without options and the run's cleanup removes it by its label)."""
        for options in (self.root / "data" / "volumes").glob("*/opts.json"):
            try:
                json.loads(options.read_bytes())
            except ValueError:
                options.unlink()

    def kill(self) -> None:
        """Crash the daemon: SIGKILL dockerd and its containerd (the shims, holding the containers, survive)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        for pid in self._own_processes():
            if Path(f"/proc/{pid}/comm").read_text().strip() == "containerd":
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        for pid in self._own_processes():  # containerd and shims that outlived a killed dockerd
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _own_processes(self) -> list[int]:
        """Processes whose command line names our private folder: ours and nobody else's."""
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and str(self.root).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def docker(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, timeout=300, **kwargs)
