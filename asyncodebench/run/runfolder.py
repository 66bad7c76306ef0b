"""One run folder, one process, one set of settings.

- `RunLock`: an OS lock (`flock`) on `<run folder>/run.lock`, held while a process evaluates or rescores the run; a
  second process on the same folder is refused. The kernel releases it when the holder exits, even by `kill -9`.
- `container_key`: the value of the run's container and volume label (and the key of its container names): the run
  id plus a digest of the run folder's absolute path, so two runs with the same id in different output folders
  never see, nor remove, each other's containers.
- `settings.json`: the settings that produce results (dataset, probes, timeouts, limits), recorded when the run
  first starts; a later start with other settings is refused with each difference named.
- `predictions/<slug>/`: each prediction's folder (`prediction_folder`; the files in it are `store`'s), named from
  the prediction's key (`Prediction.slug`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import socket
from pathlib import Path, PurePosixPath
from typing import Any

from asyncodebench.dataset.rows import LOCAL, PublishedRows
from asyncodebench.harness.evaluation import Settings
from asyncodebench.run import store
from asyncodebench.run.predictions import Prediction

LOCK, SETTINGS, PREDICTIONS = "run.lock", "settings.json", "predictions"
SETTINGS_VERSION = 1


class RunFolderBusyError(RuntimeError):
    """Another process holds the run folder."""


class SettingsChangedError(ValueError):
    """The run folder's results were made with other settings than the ones given now."""


def container_key(run_dir: Path, run_id: str) -> str:
    """`<run id>-<8 hex>`: the label value and name key of this run folder's containers and volumes."""
    return f"{run_id}-{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]}"


class RunLock:
    """`with RunLock(run_dir):` holds the run folder for this process (creating it), or raises RunFolderBusyError."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.fd: int | None = None

    def __enter__(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 500).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise RunFolderBusyError(
                f"the run folder {self.run_dir} is in use by {holder}; wait until it finishes (then rerun this "
                "command to resume), or choose another --run-id or --output-dir") from None
        os.ftruncate(fd, 0)
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        os.write(fd, f"process {os.getpid()} on {socket.gethostname()} (since {started})\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock; the file stays, so no other process races on it
            self.fd = None


def prediction_path(prediction: Prediction) -> PurePosixPath:
    """Where a prediction's files lie inside any run folder, `predictions/<slug>`: on disk and in the report's links."""
    return PurePosixPath(PREDICTIONS, prediction.slug)


def prediction_folder(run_dir: Path, prediction: Prediction) -> Path:
    """The folder of one prediction's files in the run folder `run_dir`."""
    return run_dir / prediction_path(prediction)


def prediction_folders(run_dir: Path) -> list[Path]:
    """Every prediction folder the run folder holds, by name (none when it holds none yet)."""
    folder = run_dir / PREDICTIONS
    return sorted(f for f in folder.iterdir() if f.is_dir()) if folder.is_dir() else []


def result_files(run_dir: Path) -> list[Path]:
    """The `result.json` of every prediction folder that has one (finished, or recorded as not evaluated)."""
    return [f / store.RESULT for f in prediction_folders(run_dir) if (f / store.RESULT).is_file()]


def settings_record(published: PublishedRows, settings: Settings,
                    mapped_images: dict[str, str] | None = None) -> dict[str, Any]:
    """What decides a run's results, as `settings.json` keeps it (`mapped_images`: task -> the --images ref)."""
    return {
        "version": SETTINGS_VERSION,
        "dataset": published.describe(),
        "mapped_images": mapped_images or {},
        **settings.to_record(),
    }


def read_settings(run_dir: Path) -> dict[str, Any] | None:
    """The settings record the run folder keeps (`settings.json`), or None before its first start."""
    path = run_dir / SETTINGS
    return store.read_json(path) if path.exists() else None


def write_settings(run_dir: Path, record: dict[str, Any]) -> None:
    """Keep `record` (see `settings_record`) as the run folder's `settings.json`."""
    store.write_json(run_dir / SETTINGS, record)


def differences(recorded: dict[str, Any], current: dict[str, Any], include_evaluation: bool = True) -> list[str]:
    """Each setting that differs, as `what: was X, now Y`; the dataset compares by content (a local folder's
    Parquet digest, a Hub dataset's id and resolved commit), not by path or tag name."""
    found = []
    was, now = recorded["dataset"], current["dataset"]
    if _dataset_identity(was) != _dataset_identity(now):
        found.append(f"dataset: was {_dataset_text(was)}, now {_dataset_text(now)}")
    if recorded.get("mapped_images", {}) != current.get("mapped_images", {}):
        found.append(f"images (--images): were {recorded.get('mapped_images') or 'the rows own'}, "
                     f"now {current.get('mapped_images') or 'the rows own'}")
    if not include_evaluation:
        return found
    if recorded["run_probes"] != current["run_probes"]:
        onoff = {True: "on", False: "off (--no-probes)"}
        found.append(f"probes: were {onoff[recorded['run_probes']]}, now {onoff[current['run_probes']]}")
    for key, flag in (("timeout_seconds", "--timeout"), ("probe_timeout_seconds", "--probe-timeout")):
        if recorded[key] != current[key]:
            found.append(f"{flag}: was {recorded[key]}, now {current[key]}")
    for key, value in recorded["limits"].items():
        if current["limits"].get(key) != value:
            found.append(f"limit {key}: was {value}, now {current['limits'].get(key)}")
    # Absent from records made before native builds: the task's own default, as None means now.
    if recorded.get("build_timeout_seconds") != current.get("build_timeout_seconds"):
        found.append(f"--build-timeout: was {recorded.get('build_timeout_seconds') or 'the task default'}, "
                     f"now {current.get('build_timeout_seconds') or 'the task default'}")
    return found


def _dataset_identity(record: dict[str, Any]) -> tuple[Any, ...]:
    if record["source"] == LOCAL:
        return (LOCAL, record["content_sha256"])
    return (record["source"], record["id"], record["resolved_commit"] or record["revision"])


def _dataset_text(record: dict[str, Any]) -> str:
    if record["source"] == LOCAL:
        return f"local folder {record['id']} (content {record['content_sha256'][:19]})"
    commit = record["resolved_commit"]
    return f"{record['id']} at {record['revision']}" + (f" (commit {commit[:12]})" if commit else "")
