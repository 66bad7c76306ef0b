"""Run untrusted code in a task container: pinned by digest, no network, bounded, always removed.

A `Sandbox` is one container. Commands run with a time limit enforced twice: by `timeout` inside the container and
by a watchdog on the host that kills the container if the inside limit fails (a process that ignores signals, a
wedged daemon). The daemon's own failures raise `SandboxUnavailableError`, never mixed with command results.
No process outlives the command that started it: a fork bomb's sleeping children would otherwise hold the process
limit, so the harness's next commands (probes, replayed states) could not start and would read stale files.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

WATCHDOG_MARGIN_SECONDS = 30
LABEL_RUN = "org.asyncodebench.run_id"


class SandboxUnavailableError(RuntimeError):
    """The container engine failed (daemon down, image missing or mismatched): an infrastructure failure."""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one evaluation container."""

    memory: str = "4g"  # memory and memory+swap: no swap escape
    cpus: float = 1.0
    pids: int = 512  # stops fork bombs
    file_size_bytes: int = 1 << 30  # largest file a process may write (RLIMIT_FSIZE), e.g. a flood of output


@dataclass(frozen=True)
class ExecResult:
    """What a command did. `killed_by_watchdog` means the inside timeout failed and the container was killed."""

    exit_code: int | None
    output: bytes
    duration_seconds: float
    killed_by_watchdog: bool = False


def docker_client() -> Any:
    """A connected Docker client.

    Raises:
        SandboxUnavailableError: the daemon does not answer.
    """
    import docker  # lazy: only evaluation needs it

    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as exc:  # the SDK raises several unrelated types here
        raise SandboxUnavailableError(
            f"the Docker daemon is not reachable ({exc}); start it (for example `dockerd &` as root) and rerun"
        ) from exc


class Sandbox:
    """One running container started from `image_ref` (an `image@sha256:` reference)."""

    def __init__(self, client: Any, image_ref: str, run_id: str, limits: Limits, workdir: str) -> None:
        import docker.errors
        from docker.types import Ulimit

        self.name = f"asyncodebench-{_safe(run_id)}-{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        try:
            self.container = client.containers.run(
                image_ref, ["sleep", "infinity"], detach=True, name=self.name, labels={LABEL_RUN: run_id},
                network_mode="none", mem_limit=limits.memory, memswap_limit=limits.memory,
                nano_cpus=int(limits.cpus * 1e9), pids_limit=limits.pids, working_dir=workdir,
                security_opt=["no-new-privileges"], cap_drop=["NET_RAW", "SYS_ADMIN", "SYS_PTRACE", "MKNOD"],
                ulimits=[Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes)],
                entrypoint=[],
            )
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailableError(f"image {image_ref} is not on this machine; pull it by digest") from exc
        except Exception as exc:  # DockerException, or a raw connection error when the daemon is gone
            raise SandboxUnavailableError(f"could not start a container from {image_ref}: {exc}") from exc

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def exec(self, script: str, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        """Run a shell script; kill the container if it outlives `timeout` plus the watchdog margin."""
        fired = threading.Event()

        def watchdog() -> None:
            fired.set()
            self._kill()

        timer = threading.Timer(timeout + WATCHDOG_MARGIN_SECONDS, watchdog)
        started = time.monotonic()
        timer.start()
        try:
            result = self.container.exec_run(["sh", "-c", script], workdir=self.workdir, environment=env or {})
        except Exception as exc:
            if fired.is_set():
                return ExecResult(None, b"", time.monotonic() - started, killed_by_watchdog=True)
            raise SandboxUnavailableError(f"the daemon failed while running a command in {self.name}: {exc}") from exc
        finally:
            timer.cancel()
        duration = time.monotonic() - started
        if fired.is_set():
            return ExecResult(None, result.output or b"", duration, killed_by_watchdog=True)
        self._end_stragglers()
        return ExecResult(result.exit_code, result.output or b"", duration)

    def _end_stragglers(self) -> None:
        """Kill what a finished command left running (daemons, forked children) by restarting the container.

        The restart keeps the filesystem (workspace and files in the IO folder) and only replaces PID 1, the idle
        `sleep`; `docker top` reads the processes from the host, so it works even when no process can start inside.
        """
        processes = self._daemon_call(lambda: self.container.top(ps_args="-o pid")["Processes"], "list processes")
        if len(processes or []) > 1:
            self._daemon_call(lambda: self.container.restart(timeout=0), "restart to end leftover processes")

    def write_files(self, files: dict[str, bytes], directory: str) -> None:
        """Copy files (name -> bytes) into `directory` inside the container."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        self._daemon_call(lambda: self.container.put_archive(directory, buffer.getvalue()), "copy files in")

    def read_file(self, path: str, limit: int) -> bytes | None:
        """The first `limit` bytes of a file in the container, or None when it does not exist."""
        files = self.read_files(path, limit)
        return next(iter(files.values())) if files else None

    def read_files(self, path: str, limit: int) -> dict[str, bytes]:
        """The regular files at `path` (a file or a folder) by their name, each cut to `limit` bytes; one call."""
        import docker.errors

        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            return {}
        except Exception as exc:
            raise SandboxUnavailableError(f"could not read {path} from {self.name}: {exc}") from exc
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            return {member.name.rsplit("/", 1)[-1]: tar.extractfile(member).read(limit)  # type: ignore[union-attr]
                    for member in tar.getmembers() if member.isfile()}

    def remove(self) -> None:
        """Remove the container, whatever state it is in."""
        try:
            self.container.remove(force=True)
        except Exception:  # already gone, or the daemon died: nothing more to do here
            pass

    def _kill(self) -> None:
        try:
            self.container.kill()
        except Exception:
            pass

    def _daemon_call(self, call: Any, what: str) -> Any:
        try:
            return call()
        except Exception as exc:
            raise SandboxUnavailableError(f"could not {what} ({self.name}): {exc}") from exc


def remove_run_containers(client: Any, run_id: str) -> int:
    """Remove containers left behind by an interrupted run (for example after `kill -9`); return how many."""
    leftovers = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    for container in leftovers:
        container.remove(force=True)
    return len(leftovers)


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:60]
