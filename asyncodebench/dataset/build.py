"""Build the release rows: derive them from the sources and validate them, all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asyncodebench.dataset.sources import Rows, load_release, read_yaml, rows_from_task_files
from asyncodebench.dataset.validation import validate_rows

HOMEPAGE = "https://huggingface.co/datasets/PhilipZhang/AsynCodeBench"
DESCRIPTION = (
    "AsynCodeBench evaluates coding agents under five execution protocols on 19 repository-level tasks, and measures "
    "whether and when the producer-consumer dependencies between agents were resolved."
)
# Rendered from CITATION.cff by asyncodebench.dataset.citation; tests/test_dataset_card.py checks the two agree.
CITATION = r"""@misc{asyncodebench2026,
  title        = {AsynCodeBench},
  author       = {{AsynCodeBench contributors}},
  year         = {2026},
  month        = nov,
  note         = {Dataset, version 0.4.2},
  howpublished = {\url{https://huggingface.co/datasets/PhilipZhang/AsynCodeBench}},
  url          = {https://huggingface.co/datasets/PhilipZhang/AsynCodeBench}
}"""


def build_release(data_dir: Path) -> Rows:
    """Rows of the release in `data_dir`, validated against the schemas and each other."""
    release, rows = load_release(data_dir)
    validate_rows(rows, release.get("expected_counts"), counts_source=str(data_dir / "release.yaml"))
    return rows


def build_task_rows(task_file: Path, protocols_file: Path, digest: str | None = None) -> Rows:
    """Validated rows of one stand-alone task (the demo), optionally pinned to a digest known only at run time."""
    rows = rows_from_task_files([task_file], protocols_file, digest_override=digest)
    validate_rows(rows)
    return rows


def release_metadata(data_dir: Path) -> dict[str, Any]:
    """The release file's fields (identity, upstream release, expected counts, task order)."""
    release: dict[str, Any] = read_yaml(data_dir / "release.yaml")
    return release
