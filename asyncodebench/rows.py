"""Load the published rows, from the Hub (with a revision) or from a local folder holding `data/<config>/*.parquet`.

The harness consumes exactly what users download: the same Parquet files, through `datasets`.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncodebench.features import FEATURES
from asyncodebench.sources import Rows

DEFAULT_DATASET = "PhilipZhang/AsynCodeBench"
DEFAULT_REVISION = "v0.4.2"


@dataclass(frozen=True)
class PublishedRows:
    """The three configurations as plain rows, with where they came from."""

    dataset: str
    revision: str | None
    resolved_commit: str
    rows: Rows


def load_published(dataset: str = DEFAULT_DATASET, revision: str | None = DEFAULT_REVISION) -> PublishedRows:
    """Load all three configurations.

    Raises:
        FileNotFoundError: `dataset` looks like a path but holds no Parquet files.
    """
    folder = Path(dataset)
    if folder.exists():
        configs = {c: _load_local(folder, c) for c in FEATURES}
        return PublishedRows(str(folder.resolve()), None, _local_version(folder), Rows(**configs))
    import datasets  # lazy: heavy, and only needed here
    from huggingface_hub import HfApi

    configs = {
        c: datasets.load_dataset(dataset, c, split="test", revision=revision).to_list() for c in FEATURES
    }
    commit = HfApi().dataset_info(dataset, revision=revision).sha or "unknown"
    return PublishedRows(dataset, revision, commit, Rows(**configs))


def _load_local(folder: Path, config: str) -> list[dict[str, Any]]:
    import datasets

    files = sorted((folder / "data" / config).glob("test-*.parquet"))
    if not files:
        raise FileNotFoundError(
            f"{folder} has no data/{config}/test-*.parquet; give a published dataset folder or a Hub id"
        )
    return datasets.load_dataset("parquet", data_files={"test": [str(f) for f in files]}, split="test").to_list()


def _local_version(folder: Path) -> str:
    """The folder's git commit if it is a clean checkout, else a digest of its Parquet files."""
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "data"], capture_output=True, text=True)
        if not dirty.stdout.strip():
            return head.stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        pass
    digest = hashlib.sha256()
    for path in sorted(folder.glob("data/*/test-*.parquet")):
        digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()
