"""One step in one fresh container: prepare a workspace state, run one pytest command as the sandbox user, read it.

The conventions of the files exchanged with a task container live here too: where the harness's scripts go, where
the evaluated code may write its report, what environment it gets. A prepared container serves exactly one pytest
process: afterwards its processes are ended and it is read, so nothing that process did can reach another one.
"""

from __future__ import annotations

import json
import posixpath
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncodebench.harness.sandbox import (
    BASE_DIR,
    IO_DIR,
    OUTPUT_CAP_BYTES,
    OUTPUT_DIR,
    OVERSIZED,
    SANDBOX_GID,
    SANDBOX_UID,
    Sandbox,
    SandboxUnavailableError,
)

SCRIPTS_DIR = Path(__file__).resolve().parent / "incontainer"  # copied into containers, never imported here
OUT_DIR = OUTPUT_DIR  # the only harness folder the evaluated code may write (its JSON report): a mount of its own
HOME_DIR = "/tmp/home"  # the evaluated code's private HOME, on its private /tmp
GIT_CONFIG = f"{IO_DIR}/git/.gitconfig"  # the trusted side's only git configuration
REPORT_CAP_BYTES = 50_000_000  # larger reports are a model outcome (unreadable); keeps parsing memory bounded
KILL_GRACE_SECONDS = 10
PREPARE_SECONDS = 300
SHADOWED_BY_DEFAULT = ("pytest", "_pytest", "py", "pluggy", "iniconfig")


@dataclass(frozen=True)
class PytestRun:
    """What one pytest process did, as the trusted side saw it."""

    exit_code: int | None  # from the daemon (the `timeout` wrapper's status), never from a file
    seconds: float
    killed_by_watchdog: bool
    tail: str  # the last megabyte of its output
    report: dict[str, Any] | None  # None when absent, {} when unreadable (not JSON, too deep, too large)
    report_problem: str | None  # None, "missing", "not_json", "not_an_object" or "oversized"
    container_name: str
    sentinel: str | None = None  # the secret the sentinel tests' names were made from (scoring/tampering.py)
    output_capped: bool = False  # the output was longer than the kept tail (OUTPUT_CAP_BYTES)
    attempts: int = 1  # runs of this process: a second one when a loaded machine may have decided the first
    limits: tuple[int, ...] = ()  # the wall-clock limit (seconds) of each run, in order (harness/retry.py)

    @property
    def timed_out(self) -> bool:
        """Whether its (last) run hit its wall-clock limit: `timeout` stopped it, or the watchdog killed it."""
        if self.killed_by_watchdog:
            return True
        return stopped_by_timeout(self.exit_code, self.seconds, self.limits[-1]) if self.limits else \
            self.exit_code == 124


@dataclass(frozen=True)
class Preparation:
    """What happened to the workspace before any evaluated code ran (read before any evaluated code runs)."""

    patch_status: str  # empty | applied | applied_with_fuzz | failed | unsafe_paths | unusable
    patch_log: str
    unsafe_paths: tuple[str, ...]
    canonical_ref: str
    restored_paths: tuple[str, ...]
    untracked_paths_removed: tuple[str, ...]
    hazards_removed: tuple[str, ...]
    changed_paths: tuple[str, ...]
    image_plugins: tuple[str, ...] = ()  # the image's own pytest plugins (entry point values), the only ones loaded
    # Why preparing the patched tree failed ("unusable": a model outcome, scored 0); None otherwise and in records
    # saved before it existed.
    unusable_reason: str | None = None

    @property
    def usable(self) -> bool:
        """Whether the patch reached the code, so evaluated code may run (not failed, unsafe or unusable)."""
        return self.patch_status not in ("failed", "unsafe_paths", "unusable")


def script_bytes(name: str) -> bytes:
    """An in-container script's source, e.g. `prepare.py`."""
    return (SCRIPTS_DIR / name).read_bytes()


# The preparation's record travels as a file (no output tail can cut it), read with a generous limit; the stage
# marker, written just before the patch is applied, tells a preparation the patch broke from one the environment
# broke. The patched tree is judged within the preparation's time less a margin, so that a pathological patch
# ends as "unusable" with a reason, long before the watchdog would kill the container.
PREPARE_RECORD = f"{IO_DIR}/prepare.out.json"
PREPARE_STAGE = f"{IO_DIR}/prepare.stage.json"
PREPARE_RECORD_CAP_BYTES = 64 << 20
JUDGE_MARGIN_SECONDS = 15


def prepare_inputs(workdir: str, base_revision: str, interpreter: str, protected: tuple[str, ...],
                   overlays: list[tuple[str, bytes]], patch: bytes,
                   judge_seconds: float = PREPARE_SECONDS - JUDGE_MARGIN_SECONDS,
                   build_dir: str | None = None, report_folder: bool = True) -> dict[str, bytes]:
    """Every file the preparation needs, by its path under IO_DIR, to be copied in as one archive.

    `judge_seconds`: from the preparation's start, how long until judging the patched tree is given up.
    `build_dir`: the task's native build tree (top-level folder), which the preparation neither copies nor walks.
    `report_folder`: False for a build's container, where no report is read, so nothing outside the tree is the
    sandbox user's to write but its private /tmp and HOME.
    """
    overlay_names = [f"overlays/{i:02d}.patch" for i in range(len(overlays))]
    config = {
        "workdir": workdir, "base_dir": BASE_DIR, "base_revision": base_revision, "interpreter": interpreter,
        "patch": f"{IO_DIR}/patch.diff", "overlays": [f"{IO_DIR}/{n}" for n in overlay_names],
        "protected_paths": sorted(protected), "import_roots": ["", "src"], "shadow_names": list(SHADOWED_BY_DEFAULT),
        "sandbox_uid": SANDBOX_UID, "sandbox_gid": SANDBOX_GID, "git_global_config": GIT_CONFIG,
        "out_dir": OUT_DIR if report_folder else None,
        "home_dir": HOME_DIR, "record_path": PREPARE_RECORD, "stage_path": PREPARE_STAGE,
        "judge_deadline_seconds": judge_seconds, "build_dir": build_dir,
    }
    files = {"prepare.py": script_bytes("prepare.py"), "integrate.py": script_bytes("integrate.py"),
             "launch.py": script_bytes("launch.py"), "prepare.json": json.dumps(config).encode(),
             "patch.diff": patch, "git/.gitconfig": b"[safe]\n\tdirectory = *\n"}
    files.update({name: data for name, (_, data) in zip(overlay_names, overlays)})
    return files


def prepare(box: Sandbox, interpreter: str, task_id: str) -> Preparation:
    """Run the trusted preparation and read its record file, before any evaluated code runs.

    Whatever happens once the patch is being applied is the patch's doing: a record saying so, or (the preparation
    died, or its record is too large to read) the stage marker, make the patch "unusable", a model outcome.

    Raises:
        SandboxUnavailableError: the preparation failed before the patch (the image's tree, the base revision,
            the overlays, the plugin listing), or the container was killed: the environment is at fault.
    """
    done = box.exec([interpreter, f"{IO_DIR}/prepare.py", IO_DIR], PREPARE_SECONDS)
    failure = f"preparing {task_id} in {box.name} failed: {done.output.decode('utf-8', 'replace')[-2000:]}"
    if done.killed_by_watchdog:  # the container is gone: nothing is left to read
        raise SandboxUnavailableError(failure)
    raw = box.read_file(PREPARE_RECORD, PREPARE_RECORD_CAP_BYTES)
    record = _json_object(raw)
    if record is not None:
        return _preparation(record)
    stage = _json_object(box.read_file(PREPARE_STAGE, PREPARE_RECORD_CAP_BYTES))
    if stage is None:
        raise SandboxUnavailableError(failure)
    why = ("its record is larger than the read limit" if raw is OVERSIZED
           else f"the preparation ended (exit code {done.exit_code}) without a record")
    return _preparation({**stage, "patch_status": "unusable", "unusable_reason": f"preparing the patched tree "
                         f"failed: {why}"})


def _json_object(raw: bytes | None) -> dict[str, Any] | None:
    """A record file written by the preparation (atomically), or None when absent, oversized or not a record."""
    if raw is None or raw is OVERSIZED:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _preparation(record: dict[str, Any]) -> Preparation:
    """A Preparation from the in-container record (or the stage marker, whose path lists are empty)."""
    paths = {key: tuple(record.get(key) or ()) for key in (
        "unsafe_paths", "restored_paths", "untracked_paths_removed", "hazards_removed", "changed_paths")}
    return Preparation(
        patch_status=record["patch_status"], patch_log=(record.get("patch_log") or "")[-5000:],
        canonical_ref=record["canonical_ref"], image_plugins=tuple(m for _, m in record["image"]["plugins"]),
        unusable_reason=record.get("unusable_reason"), **paths)


def launch_config(workdir: str, plugins: tuple[str, ...], image_pythonpath: str | None,
                  sentinel: dict[str, str] | None) -> bytes:
    """The launcher's `launch.json`: the image's plugins and PYTHONPATH, the tree's import roots, the sandbox user
    and the sentinel settings (None: no sentinels)."""
    roots = [workdir, f"{workdir}/src"]
    return json.dumps({"plugins": list(plugins), "import_roots": roots, "image_pythonpath": image_pythonpath,
                       "workdir": workdir, "sandbox_uid": SANDBOX_UID, "sandbox_gid": SANDBOX_GID,
                       "sentinel": sentinel}).encode()


def sentinel_folder(workdir: str, near: str) -> str:
    """Where the sentinel tests are said to live: beside the first test target or probe (a file's folder, or the
    folder itself), so they sit among the real tests."""
    path = near.split("::", 1)[0].rstrip("/")
    if path.startswith(("-", "/")):  # an option, or nothing of the tree: the tree's root
        return workdir
    folder = posixpath.dirname(path) if path.endswith(".py") else path
    return posixpath.join(workdir, folder) if folder else workdir


def run_pytest(box: Sandbox, workdir: str, interpreter: str, plugins: tuple[str, ...], args: tuple[str, ...],
               seconds: int, near: str = "") -> PytestRun:
    """Run pytest once as the sandbox user under `timeout`; end every process it left, then read its report.

    `args` may name `{report}`: the JSON report's path, in the one folder the evaluated code may write. `timeout`
    runs as root and the launcher becomes the sandbox user at once, so the evaluated code can neither signal the
    `timeout` nor read the launch configuration (the sentinels' secret). `near` places the sentinel tests.
    """
    image_env = box.image_env
    token = secrets.token_hex(8)
    sentinel = {"token": token, "folder": sentinel_folder(workdir, near)}
    box.write_files({"launch.json": launch_config(workdir, plugins, image_env.get("PYTHONPATH"), sentinel)}, IO_DIR,
                    mode=0o600)
    report_path = f"{OUT_DIR}/report.json"
    argv = ["timeout", "-k", str(KILL_GRACE_SECONDS), str(seconds), interpreter, "-s", f"{IO_DIR}/launch.py",
            f"{IO_DIR}/launch.json", *(a.replace("{report}", report_path) for a in args)]
    env = {"HOME": HOME_DIR, "TMPDIR": "/tmp", "PYTHONPATH": ""}
    done = box.exec(argv, seconds + KILL_GRACE_SECONDS, env=env)
    # A container the watchdog killed, or whose memory the evaluated code filled until the OOM killer emptied it,
    # is gone with anything it wrote: the report is missing, a model outcome.
    readable = not done.killed_by_watchdog and box.end_processes()
    raw = box.read_file(report_path, REPORT_CAP_BYTES) if readable else None
    report, problem = parse_report(raw)
    tail = done.output.decode("utf-8", errors="replace")
    return PytestRun(done.exit_code, round(done.duration_seconds, 3), done.killed_by_watchdog, tail, report, problem,
                     box.name, token, len(done.output) >= OUTPUT_CAP_BYTES, limits=(seconds,))


def parse_report(raw: bytes | None) -> tuple[dict[str, Any] | None, str | None]:
    """The report as a dict, or why not. Whatever the evaluated code wrote is a model outcome, never an error."""
    if raw is None:
        return None, "missing"
    if raw is OVERSIZED:
        return {}, "oversized"
    try:
        report = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}, "not_json"
    return (report, None) if isinstance(report, dict) else ({}, "not_an_object")


def stopped_by_timeout(exit_code: int | None, seconds: float, limit: int) -> bool:
    """Whether `timeout` ended the command: 124, or 137 when it had to escalate to SIGKILL after the full limit.

    A 137 before the limit is another SIGKILL (the kernel's OOM killer), not a timeout.
    """
    return exit_code == 124 or (exit_code == 137 and seconds >= limit)
