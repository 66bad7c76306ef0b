"""Load the published rows, from the Hub (with a revision) or from a local folder holding `data/<config>/*.parquet`.

The harness consumes exactly what users download: the same Parquet files, through `datasets`. Where the rows came
from is kept as it is: a Hub id with its revision and resolved commit, or a local folder with a content digest of
its Parquet files (never called a commit).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncodebench.dataset.sources import Rows

DEFAULT_DATASET = "PhilipZhang/AsynCodeBench"
DEFAULT_REVISION = "v0.4.2"
CONFIGS = ("tasks", "scenarios", "dependencies")  # the published configurations (`features.FEATURES` types each)
HUB, LOCAL = "hub", "local_folder"
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


class DatasetNotFoundError(FileNotFoundError):
    """`--dataset` names no usable folder and no dataset on the Hub: a bad argument (exit 2)."""


class DatasetUnavailableError(RuntimeError):
    """The Hub (or the mirror in HF_ENDPOINT) could not be reached: an infrastructure failure (exit 3)."""


@dataclass(frozen=True)
class PublishedRows:
    """The three configurations as plain rows, with where they came from.

    `source` is `hub` (`dataset` is the Hub id; `revision` as asked; `resolved_commit` the commit it resolved to,
    None offline) or `local_folder` (`dataset` is the folder's absolute path; `content_digest` a sha256 over its
    Parquet files; no revision and no commit).
    """

    dataset: str
    revision: str | None
    resolved_commit: str | None
    rows: Rows
    source: str = HUB
    content_digest: str | None = None

    def describe(self) -> dict[str, Any]:
        """The source as run reports and settings records keep it."""
        return {"source": self.source, "id": self.dataset, "revision": self.revision,
                "resolved_commit": self.resolved_commit, "content_sha256": self.content_digest}


def load_published(dataset: str = DEFAULT_DATASET, revision: str | None = DEFAULT_REVISION) -> PublishedRows:
    """Load all three configurations, without progress bars (the caller keeps the only progress display).

    Raises:
        DatasetNotFoundError (a FileNotFoundError): `dataset` is a folder without the Parquet files of every
            configuration, looks like a path that does not exist, or is a Hub id (or revision) the Hub does not have.
        DatasetUnavailableError: the Hub (HF_ENDPOINT) did not answer.
    """
    folder = Path(dataset).expanduser()
    if folder.is_dir():
        files = _local_files(folder)
        configs = {c: _load_parquet(paths) for c, paths in files.items()}
        rows = Rows(configs.get("tasks", []), configs.get("scenarios", []), configs.get("dependencies", []))
        return PublishedRows(str(folder.resolve()), None, None, rows, LOCAL, _content_digest(files))
    if folder.exists() or not _HUB_ID.fullmatch(dataset):
        what = "is not a folder" if folder.exists() else "does not exist"
        raise DatasetNotFoundError(
            f"--dataset {dataset}: {what}; give a published dataset folder (one holding data/<config>/test-*.parquet, "
            f"such as the kit's root `.`) or a Hub id such as {DEFAULT_DATASET}")
    return _load_hub(dataset, revision)


def _quiet() -> None:
    """No progress bars or info logs from `datasets` and the Hub client: the caller keeps the only progress display."""
    import datasets  # lazy: heavy, and only needed for the Hub
    import huggingface_hub.utils

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    huggingface_hub.utils.disable_progress_bars()


def _local_files(folder: Path) -> dict[str, list[Path]]:
    """Each configuration's Parquet files, from `<folder>/data/<config>/` or, given the `data` folder itself,
    `<folder>/<config>/`."""
    found, missing = {}, []
    for config in CONFIGS:
        for place in (folder / "data" / config, folder / config):
            files = sorted(place.glob("test-*.parquet"))
            if files:
                found[config] = files
                break
        else:
            missing.append(config)
    if missing:
        names = ", ".join(f"data/{c}/test-*.parquet" for c in missing)
        raise DatasetNotFoundError(
            f"--dataset {folder}: the folder has no {names}; give a published dataset folder (one holding "
            "data/<config>/test-*.parquet for tasks, scenarios and dependencies, such as the kit's root `.`)")
    return found


def _load_parquet(files: list[Path]) -> list[dict[str, Any]]:
    """A configuration's rows from its Parquet files, read with pyarrow: the same rows `datasets.load_dataset`
    gives for them (a test compares the two), without importing `datasets` (a second or more per process)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()


def _content_digest(files: dict[str, list[Path]]) -> str:
    """sha256 over every configuration's Parquet files (name and bytes), whatever folder they sit in."""
    digest = hashlib.sha256()
    for config in sorted(files):
        for path in files[config]:
            digest.update(f"{config}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()


def _load_hub(dataset: str, revision: str | None) -> PublishedRows:
    import datasets
    from huggingface_hub import HfApi, constants

    _quiet()
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    endpoint = constants.ENDPOINT
    if constants.HF_HUB_OFFLINE:
        hint = "pass --dataset with a published dataset folder, or unset HF_HUB_OFFLINE to download it"
    else:
        hint = ("pass --dataset with a published dataset folder, set HF_ENDPOINT to a Hub mirror that answers, or "
                "HF_HUB_OFFLINE=1 to use a copy already in the Hugging Face cache")
    if dataset != DEFAULT_DATASET:
        hint += f" (if {dataset} was meant as a folder: there is no such folder here)"
    commit = None
    if not constants.HF_HUB_OFFLINE:
        # One quick request first: it resolves the commit and fails at once when the Hub is down, where the
        # dataset loader would retry for half a minute.
        try:
            commit = HfApi().dataset_info(dataset, revision=revision).sha
        except RevisionNotFoundError:
            raise DatasetNotFoundError(
                f"--revision {revision}: the Hub dataset {dataset} has no such revision (tag, branch or commit)"
            ) from None
        except RepositoryNotFoundError:
            raise DatasetNotFoundError(
                f"--dataset {dataset}: no such folder here, and no such dataset on the Hub ({endpoint}); give a "
                f"published dataset folder or a Hub id such as {DEFAULT_DATASET}") from None
        except Exception as exc:  # the HTTP client's, the Hub's or the OS's: it did not answer usefully
            raise DatasetUnavailableError(
                f"could not reach the Hugging Face Hub at {endpoint} to load {dataset}@{revision} "
                f"({_cause(exc)}); {hint}") from None
    try:
        configs = {c: datasets.load_dataset(dataset, c, split="test", revision=revision).to_list() for c in CONFIGS}
    except Exception as exc:  # ConnectionError, the Hub's HTTP errors, the HTTP client's: one message, no traceback
        where = "the Hugging Face cache (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else \
            f"the Hugging Face Hub at {endpoint}"
        raise DatasetUnavailableError(f"could not load {dataset}@{revision} from {where} ({_cause(exc)}); {hint}") \
            from None
    return PublishedRows(dataset, revision, commit, Rows(**configs), HUB)


def _cause(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
