"""Assemble the Hub folder of a release and upload it.

The Hub gets the card, the benchmark declaration (`eval.yaml`), the Parquet files, the license files and the
citation; never the builder or the sources (a `<repo name>.py` at the root of a Hub repo makes `load_dataset`
refuse it since datasets 4.0).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from asyncodebench.dataset.export import PARQUET_NAME
from asyncodebench.dataset.features import FEATURES

ROOT = Path(__file__).resolve().parents[2]
# eval.yaml registers the dataset as a Hub benchmark (the leaderboard of `.eval_results/` scores); it sits at the root.
TOP_LEVEL_FILES = ("README.md", "eval.yaml", "LICENSE", "THIRD_PARTY_NOTICES.md", "CITATION.cff")


@dataclass(frozen=True)
class HubFile:
    """One file of the assembled Hub folder: its path inside the folder, its size in bytes and its SHA-256."""

    path: str
    size: int
    sha256: str


def hub_files(root: Path = ROOT) -> list[Path]:
    """The files the Hub repository holds, relative to `root`."""
    files = [Path(name) for name in TOP_LEVEL_FILES]
    files += [Path("data") / config / PARQUET_NAME for config in FEATURES]
    # The pictures the card shows by relative path, so they are not broken on the Hub.
    readme = (root / "README.md").read_text(encoding="utf-8") if (root / "README.md").is_file() else ""
    files += [Path(link) for link in dict.fromkeys(re.findall(r"!\[[^\]]*\]\(((?!https?:)[^)\s]+)\)", readme))]
    # The kit's documents the card links to (docs/*.md), for the same reason.
    files += [Path(link) for link in dict.fromkeys(re.findall(r"(?<!!)\[[^\]]*\]\((docs/[^)\s#]+\.md)(?:#[^)\s]*)?\)",
                                                              readme))]
    missing = [str(f) for f in files if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"cannot assemble the Hub folder, missing: {', '.join(missing)} "
                                "(run `python AsynCodeBench.py`)")
    return files


def assemble(out_dir: Path, root: Path = ROOT) -> list[HubFile]:
    """Copy the Hub files into an empty `out_dir`; return what was copied."""
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty; give a new folder")
    listed = []
    for rel in hub_files(root):
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, target)
        data = target.read_bytes()
        listed.append(HubFile(str(rel), len(data), hashlib.sha256(data).hexdigest()))
    return listed


def upload(folder: Path, repo_id: str, tag: str, token: str) -> str:
    """Upload `folder` as the dataset repo's main branch and tag the resulting commit; return its SHA."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    commit = api.upload_folder(
        repo_id=repo_id, repo_type="dataset", folder_path=str(folder), commit_message=f"Release {tag}",
        delete_patterns=["*.py"],  # a stray loading script would break load_dataset
    )
    api.create_tag(repo_id, repo_type="dataset", tag=tag, revision=commit.oid, exist_ok=False)
    return commit.oid
