"""Assemble the Hub folder of a release and upload it.

The Hub gets the card, the benchmark declaration (`eval.yaml`), the Parquet files, the license files, the citation
and the kit's pages under `docs/` that the card links to (directly or through another such page) with the pictures
they show, so no link of the card is broken there; never the builder or the sources (a `<repo name>.py` at the root
of a Hub repo makes `load_dataset` refuse it since datasets 4.0).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from asyncodebench.dataset.export import PARQUET_NAME
from asyncodebench.dataset.features import FEATURES

ROOT = Path(__file__).resolve().parents[2]
# eval.yaml registers the dataset as a Hub benchmark (the leaderboard of `.eval_results/` scores); it sits at the root.
TOP_LEVEL_FILES = ("README.md", "eval.yaml", "LICENSE", "THIRD_PARTY_NOTICES.md", "CITATION.cff")
# The kit's folder of pages and pictures meant for readers; other kit files (code, sources) never go to the Hub.
DOCS = "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # a Markdown link or picture: [text](target) or ![text](target)
CODE = re.compile(r"^```.*?^```[^\n]*$|`[^`\n]*`", re.MULTILINE | re.DOTALL)  # shown as typed: no link in there


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
    files += linked_docs(root)
    missing = [str(f) for f in files if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"cannot assemble the Hub folder, missing: {', '.join(missing)} "
                                "(run `python AsynCodeBench.py`)")
    return files


def relative_links(page: str, text: str) -> list[str]:
    """The kit files the Markdown `text` of `page` (a path from the kit's root) links to or shows, as paths from the
    root; web addresses, same-page anchors and paths leaving the root are left out."""
    found = []
    for target in LINK.findall(CODE.sub("", text)):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", path):  # `#anchor`, https:, mailto:
            continue
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
        if resolved != ".." and not resolved.startswith("../"):
            found.append(resolved)
    return found


def linked_docs(root: Path = ROOT) -> list[Path]:
    """The files under docs/ that the card links to or shows, directly or through a linked page, in link order."""
    found: dict[str, None] = {}
    pages = ["README.md"]
    while pages:
        page = pages.pop(0)
        text = (root / page).read_text(encoding="utf-8") if (root / page).is_file() else ""
        for rel in relative_links(page, text):
            if rel.startswith(DOCS + "/") and rel not in found:
                found[rel] = None
                if rel.endswith(".md"):
                    pages.append(rel)
    return [Path(rel) for rel in found]


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
