"""Run untrusted code in task containers: pinned by digest, no network, bounded, one container per step, removed.

Two trust domains share a container. The trusted side is root: it prepares the work tree (`incontainer/prepare.py`)
before any evaluated code exists in the container, and afterwards only reads files from the host through the
archive API. The evaluated side runs as an unprivileged user (`SANDBOX_UID`) on a read-only root filesystem; all it
can write is the container's own work tree, a private temp folder and its output folder, each a size- and
inode-bounded tmpfs, so disk use is bounded and nothing of one container reaches another. What the trusted side
needs once evaluated code has run (the init's marker, the preparation's records) lives in `IO_DIR`, a tmpfs of its
own that is root's alone: the output folder is a separate mount over it, so evaluated code that fills its folders
(space or inodes) cannot fill that one. Every step (a checkpoint state's probes, the final evaluator, the final
probes) gets a fresh container started from image + the image's work tree, so no state inherits anything from an
earlier one.

After each command, every process it started is ended before any file is read (`end_processes`).

Commands have a time limit enforced twice: by `timeout` inside and by a watchdog on the host that kills the
container if the inside limit fails. Output is streamed and only its tail kept; files are read through a bounded
stream, so the harness's memory does not depend on what the container writes. The daemon's own failures raise
`SandboxUnavailableError`, never mixed with command results.
"""

from __future__ import annotations

import collections
import fcntl
import io
import os
import tarfile
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

WATCHDOG_MARGIN_SECONDS = 30
LABEL_RUN = "org.asyncodebench.run_id"
LABEL_OWNER = "org.asyncodebench.owner"  # the process that started a container (see `set_owner`)
SANDBOX_UID = SANDBOX_GID = 65534  # `nobody` in Debian-based images; never root
BASE_DIR = "/asyncodebench-base"  # the image's own work tree, read-only, copied into each container's tmpfs
IO_DIR = "/asyncodebench"  # root's alone: harness scripts, patches, records, the init's marker
OUTPUT_DIR = f"{IO_DIR}/out"  # a tmpfs of its own over IO_DIR: the only harness folder evaluated code may write
OUTPUT_INODES = 10_000
OUTPUT_CAP_BYTES = 1_000_000  # the last megabyte of a command's output is kept
STREAM_CHUNK_BYTES = 1 << 16
OVERSIZED = b"\0asyncodebench: larger than the read limit\0"  # what `read_file` returns for a file over its limit
REMOVAL_WAIT_SECONDS = 60  # for a removal the daemon had begun when we asked for it again
INTERRUPT_SETTLE_SECONDS = 1.0  # for calls a signal cut short on our side to be carried out by the daemon
ENDED_WAIT_SECONDS = 30  # for killed processes to be gone (a loaded host is slow to run them to their end)
ENDED_MARKER = f"{IO_DIR}/ended"  # the init's: written at its start, its count of ends overwritten in place
MARKER_RUNNING = b"ended 000000\n"  # none yet; each end writes its count in the same 13 bytes, in place
# PID 1 of every container, run by root with the task's interpreter: on SIGUSR1 it kills every other process of
# the container with one kill(-1, SIGKILL) (the kernel spares only PID 1, and does it atomically against fork),
# reaps them, and says so in ENDED_MARKER once none is left, with how many times it has done so (a container may be
# emptied more than once: the marker of an earlier end must not pass for this one). It needs no new process, so a
# fork bomb holding the process limit cannot keep it from acting, and it reaps orphans all along (`sleep infinity`
# did not). Saying so needs no space, no inode and no new page either: the marker is written when the container
# starts, before any evaluated code exists, and overwritten in place at the end with text of the same length;
# nothing the evaluated code fills (its folders, the container's memory) can make that write fail, and no error
# ends the init (it would take the container's files).
INIT_SCRIPT = """
import os, signal, sys, time
ends = 0
def reap(*_):
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return
def running():
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != "1":
            try:
                with open("/proc/%s/stat" % pid) as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                        yield pid
            except (OSError, IndexError):
                continue
def end(*_):
    global ends
    while True:
        try:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            while any(running()):
                reap()
                time.sleep(0.005)
            reap()
            ends += 1
            os.pwrite(marker, b"ended %06d\\n" % ends, 0)
            return
        except Exception:
            time.sleep(0.05)
marker = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(marker, ARGUMENT_RUNNING, 0)
any(running())
signal.signal(signal.SIGCHLD, reap)
signal.signal(signal.SIGUSR1, end)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    signal.pause()
""".replace("ARGUMENT_RUNNING", repr(MARKER_RUNNING))


class SandboxUnavailableError(RuntimeError):
    """The container engine failed (daemon down, image missing or mismatched): an infrastructure failure."""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one evaluation container."""

    memory: str = "4g"  # memory and memory+swap: no swap escape; tmpfs pages written inside count here too
    cpus: float = 1.0
    pids: int = 512  # stops fork bombs
    file_size_bytes: int = 1 << 30  # largest file a process may write (RLIMIT_FSIZE), e.g. a flood of output
    workspace: str = "4g"  # tmpfs holding the work tree (repository, .git and what the tests write there)
    tmp: str = "1g"  # the evaluated code's private /tmp (and HOME)
    io: str = "512m"  # each of two tmpfs: the harness's own folder (scripts, patches, records) and, apart, the
    # evaluated code's output folder (its JSON reports)
    inodes: int = 1_000_000  # per tmpfs
    build_space: str = "4g"  # tmpfs holding what a state's native build writes over the image's build tree


@dataclass(frozen=True)
class ExecResult:
    """What a command did. `killed_by_watchdog` means the inside timeout failed and the container was killed."""

    exit_code: int | None
    output: bytes  # the last OUTPUT_CAP_BYTES of stdout and stderr
    duration_seconds: float
    killed_by_watchdog: bool = False


_owner: str | None = None


def set_owner(owner: str) -> None:
    """Label every container this process starts from now on with `owner`. The Ray executor names the node and
    worker process, so a later task on the same daemon can tell a dead attempt's leftovers from live work."""
    global _owner
    _owner = owner


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


def _tmpfs_volume(target: str, size: str, inodes: int, run_id: str, read_only: bool = False) -> Any:
    """An anonymous tmpfs volume: mounted by the daemon on the host, so the archive API can read and write it."""
    from docker.types import DriverConfig, Mount

    options = {"type": "tmpfs", "device": "tmpfs", "o": f"size={size},nr_inodes={inodes},mode=0755"}
    return Mount(target, None, type="volume", read_only=read_only, labels={LABEL_RUN: run_id},
                 driver_config=DriverConfig("local", options))


def base_volume(client: Any, image_ref: str, run_id: str, workdir: str,
                on_create: Callable[[str], None] | None = None) -> str:
    """A named volume holding the image's own work tree, made once per run and image (Docker copies the image's
    folder into a new volume when a container mounts it there); each container copies it into its own tmpfs.

    `on_create(name)` runs once, when the volume is made (under the same lock); if it raises, the volume is removed.
    """
    import hashlib

    name = f"asyncodebench-base-{hashlib.sha256(f'{run_id} {image_ref}'.encode()).hexdigest()[:20]}"
    # Processes evaluating the same run on this host (Ray workers) must not see the volume before it is filled.
    with open(_lock_path(name), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            existing = client.volumes.list(filters={"name": name})
            if any(v.name == name for v in existing):
                return name
            client.volumes.create(name, labels={LABEL_RUN: run_id})
            container = client.containers.create(image_ref, ["true"], network_mode="none", entrypoint=[],
                                                  volumes={name: {"bind": workdir, "mode": "rw"}},
                                                  labels={LABEL_RUN: run_id})
            container.remove(force=True)
        except Exception as exc:
            raise SandboxUnavailableError(f"could not copy the work tree of {image_ref} into a volume: {exc}") from exc
        if on_create is not None:
            try:
                on_create(name)
            except BaseException:
                client.volumes.get(name).remove(force=True)
                raise
    return name


class Sandbox:
    """One running container started from `image_ref` (an `image@sha256:` reference), prepared for one step."""

    def __init__(self, client: Any, image_ref: str, run_id: str, limits: Limits, workdir: str, base: str,
                 interpreter: str, build_tree: tuple[str, str, bool] | None = None) -> None:
        """`build_tree`: (volume, folder of the work tree, read only) of a state's native build tree, or None."""
        import docker.errors
        from docker.types import Mount, Ulimit

        self.client = client
        self.name = f"asyncodebench-{_safe(run_id)}-{uuid.uuid4().hex[:8]}"
        self.ends_requested = 0  # how many times `end_processes` asked the init to empty the container
        self.workdir = workdir
        mounts = [
            _tmpfs_volume(workdir, limits.workspace, limits.inodes, run_id),
            _tmpfs_volume(IO_DIR, limits.io, 10_000, run_id),
            _tmpfs_volume(OUTPUT_DIR, limits.io, OUTPUT_INODES, run_id),  # mounted over IO_DIR, root's until handed
            Mount(BASE_DIR, base, type="volume", read_only=True),
        ]
        if build_tree is not None:
            volume, folder, read_only = build_tree
            mounts.append(Mount(f"{workdir}/{folder}", volume, type="volume", read_only=read_only))
        try:
            self.container = client.containers.run(
                image_ref, [interpreter, "-I", "-c", INIT_SCRIPT, ENDED_MARKER], detach=True, name=self.name,
                labels=run_labels(run_id),
                network_mode="none", mem_limit=limits.memory, memswap_limit=limits.memory,
                nano_cpus=int(limits.cpus * 1e9), pids_limit=limits.pids, working_dir=workdir,
                read_only=True, mounts=mounts,
                # Docker mounts a tmpfs noexec by default; test suites run scripts they write there (cookiecutter's
                # hooks), as upstream allows, and the work tree is executable anyway.
                tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={limits.tmp},nr_inodes={limits.inodes},mode=1777"},
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

    @property
    def image_env(self) -> dict[str, str]:
        """The image's environment (`ENV` lines), which every command inherits."""
        pairs = (self.container.attrs.get("Config") or {}).get("Env") or []
        return dict(pair.split("=", 1) for pair in pairs if "=" in pair)

    def exec(self, argv: list[str], timeout: float, env: dict[str, str] | None = None, user: str = "0") -> ExecResult:
        """Run `argv` as `user`; the exit code comes from the daemon, the output is streamed and only its tail kept.

        The container is killed if the command outlives `timeout` plus the watchdog margin.
        """
        fired = threading.Event()

        def watchdog() -> None:
            fired.set()
            self._kill()

        api = self.client.api
        tail: collections.deque[bytes] = collections.deque()
        kept = 0
        timer = threading.Timer(timeout + WATCHDOG_MARGIN_SECONDS, watchdog)
        started = time.monotonic()
        timer.start()
        try:
            exec_id = api.exec_create(self.container.id, argv, user=user, environment=env or {},
                                      workdir=self.workdir)["Id"]
            for chunk in api.exec_start(exec_id, stream=True):
                tail.append(chunk)
                kept += len(chunk)
                while kept - len(tail[0]) >= OUTPUT_CAP_BYTES:
                    kept -= len(tail.popleft())
            exit_code = None if fired.is_set() else api.exec_inspect(exec_id)["ExitCode"]
        except Exception as exc:
            if fired.is_set():
                return ExecResult(None, b"".join(tail)[-OUTPUT_CAP_BYTES:], time.monotonic() - started, True)
            raise SandboxUnavailableError(f"the daemon failed while running a command in {self.name}: {exc}") from exc
        finally:
            timer.cancel()
        output = b"".join(tail)[-OUTPUT_CAP_BYTES:]
        return ExecResult(exit_code, output, time.monotonic() - started, fired.is_set())

    def end_processes(self) -> bool:
        """End everything the evaluated code started, before any of its files is read; the container stays up.

        Returns whether the container's files can be read: False when the kernel's OOM killer emptied it, init
        included (files the evaluated code wrote to its memory-counted tmpfs filled the container's memory), which
        took its tmpfs with it; that is the evaluated code's doing, never a daemon failure.

        The container's init (`INIT_SCRIPT`) kills every other process at once and says when none is left; only
        if it does not within ENDED_WAIT_SECONDS is the container frozen (cgroup freezer, which a loaded host can
        refuse: then a daemon failure).
        """
        self.ends_requested += 1
        try:
            self._daemon_call(lambda: self.container.kill(signal="SIGUSR1"), "signal the container's init")
            deadline, polls = time.monotonic() + ENDED_WAIT_SECONDS, 0
            while time.monotonic() < deadline:
                if _ends_done(self.read_file(ENDED_MARKER, 100)) >= self.ends_requested:
                    return True
                polls += 1
                if polls % 50 == 0 and self._stopped():  # no init to answer: the freeze below says why
                    break
                time.sleep(0.02)
            self._daemon_call(self.container.pause, "freeze the container")
        except SandboxUnavailableError:
            if not self.stopped_by_oom_killer():
                raise
            return False
        return True

    def _stopped(self) -> bool:
        try:
            self.container.reload()
        except Exception:  # the daemon does not answer: the freeze says so
            return False
        return not (self.container.attrs.get("State") or {}).get("Running", True)

    def stopped_by_oom_killer(self) -> bool:
        """Whether the container has stopped because the kernel's OOM killer ended its processes."""
        try:
            self.container.reload()
        except Exception:  # the daemon does not answer: nothing is known
            return False
        state = self.container.attrs.get("State") or {}
        return not state.get("Running", True) and bool(state.get("OOMKilled"))

    def write_files(self, files: dict[str, bytes], directory: str, mode: int = 0o644) -> None:
        """Copy files (name -> bytes) into `directory` inside the container, owned by root."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), mode
                tar.addfile(info, io.BytesIO(data))
        self._daemon_call(lambda: self.container.put_archive(directory, buffer.getvalue()), "copy files in")

    def read_file(self, path: str, limit: int) -> bytes | None:
        """A regular file's bytes; None when it does not exist or is not a regular file (a symlink, a folder);
        `OVERSIZED` when it is larger than `limit`. The archive is streamed to a bounded spool, never held whole."""
        import docker.errors

        try:
            stream, _ = self.container.get_archive(path, chunk_size=STREAM_CHUNK_BYTES)
        except docker.errors.NotFound:
            return None
        except Exception as exc:
            raise SandboxUnavailableError(f"could not read {path} from {self.name}: {exc}") from exc
        cap = limit + (1 << 20)  # tar headers and padding
        with tempfile.SpooledTemporaryFile(max_size=8 << 20) as spool:
            try:
                for chunk in stream:
                    spool.write(chunk)
                    if spool.tell() > cap:
                        return OVERSIZED
            except Exception as exc:
                raise SandboxUnavailableError(f"could not read {path} from {self.name}: {exc}") from exc
            finally:
                getattr(stream, "close", lambda: None)()
            spool.seek(0)
            try:
                with tarfile.open(fileobj=spool) as tar:
                    member = tar.next()
                    if member is None or not member.isfile():
                        return None
                    if member.size > limit:
                        return OVERSIZED
                    return tar.extractfile(member).read()  # type: ignore[union-attr]
            except tarfile.TarError:
                return None

    def remove(self) -> None:
        """Remove the container and its anonymous volumes, whatever state it is in."""
        try:
            self.container.remove(force=True, v=True)
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


def _ends_done(marker: bytes | None) -> int:
    """How many times the init has emptied the container, from ENDED_MARKER's text (0: not yet, or unreadable)."""
    words = (marker or b"").split()
    return int(words[1]) if len(words) == 2 and words[0] == b"ended" and words[1].isdigit() else 0


def remove_run_containers(client: Any, run_id: str, settle_seconds: float = 0.0) -> int:
    """Remove the containers and volumes left behind by an interrupted run (for example after `kill -9`).

    `settle_seconds` > 0 (a run interrupting itself): sweep again after that long, since a create call the signal cut
    short on our side is still carried out by the daemon and may make its container after the first sweep.
    """
    removed = _remove_run_containers(client, run_id)
    if settle_seconds > 0:
        time.sleep(settle_seconds)
        removed += _remove_run_containers(client, run_id)
    return removed


def _remove_run_containers(client: Any, run_id: str) -> int:
    import docker.errors

    # Sparse: no inspection of each listed container, which may be removed meanwhile by the evaluation it serves.
    leftovers = client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    for container in leftovers:
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:  # removed meanwhile (by its own evaluation, or a cleanup sharing the daemon)
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
            # Its removal is already under way: the one a Ctrl-C or SIGTERM cut short in the middle of its call
            # (the daemon goes on with it). Wait for it to end, so that nothing of the run is left when we return.
            _wait_removed(client, container.id)
    remove_run_volumes(client, run_id)
    return len(leftovers)


def _wait_removed(client: Any, container_id: str, seconds: float = REMOVAL_WAIT_SECONDS) -> None:
    """Wait until the daemon has finished removing a container (gone, or still there after `seconds`)."""
    import docker.errors

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            client.containers.get(container_id)
        except docker.errors.NotFound:
            return
        time.sleep(0.1)


def remove_run_volumes(client: Any, run_id: str) -> None:
    """Remove the run's base volumes (and anonymous volumes of containers already gone)."""
    for volume in client.volumes.list(filters={"label": f"{LABEL_RUN}={run_id}"}):
        try:
            volume.remove(force=True)
        except Exception:  # still in use by a container being removed; the next cleanup takes it
            continue
        try:
            os.unlink(_lock_path(volume.name))  # the run is over: nothing waits to fill that volume
        except OSError:
            pass


def _lock_path(volume: str) -> str:
    return f"{tempfile.gettempdir()}/{volume}.lock"


def run_labels(run_id: str) -> dict[str, str]:
    """The labels of a container of the run `run_id` (and of the process that started it)."""
    return {LABEL_RUN: run_id, **({LABEL_OWNER: _owner} if _owner else {})}


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:60]
