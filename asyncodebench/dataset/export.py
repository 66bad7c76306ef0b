"""Export the built configurations as Parquet, write the dataset card's YAML front matter and the third-party notices.

Building is deterministic: the rows come from the sources in a fixed order and the Parquet writer is the one
`datasets` uses, so a fresh export is byte-identical to the committed files (`--check` proves it).

The card's sizes follow the `datasets` convention: `num_bytes` and `dataset_size` are the in-memory Arrow size of the
rows as `load_dataset` reports it after reading the Parquet file, `download_size` is the size of the Parquet file.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from asyncodebench.dataset.build import build_release, release_metadata
from asyncodebench.dataset.features import FEATURES
from asyncodebench.dataset.notices import NOTICES_NAME, render_notices
from asyncodebench.dataset.problems import SourceError

ROOT = Path(__file__).resolve().parents[2]
PARQUET_NAME = "test-00000-of-00001.parquet"


def parquet_path(root: Path, config: str) -> Path:
    """Where a configuration's Parquet file lives under a release root: `data/<config>/test-00000-of-00001.parquet`."""
    return root / "data" / config / PARQUET_NAME


def export(builder_cls: type, data_dir: Path, out_root: Path) -> dict[str, Any]:
    """Write `out_root/data/<config>/test-00000-of-00001.parquet` for every config and
    `out_root/THIRD_PARTY_NOTICES.md`; return the card's YAML.

    Raises:
        SourceError: the sources are invalid; nothing is written.
    """
    rows = build_release(data_dir)  # validate everything before writing anything
    notices = render_notices(rows.tasks, str(release_metadata(data_dir)["upstream_release"]))
    infos = {}
    with tempfile.TemporaryDirectory() as tmp:
        staged = {}
        for config in FEATURES:
            builder = builder_cls(config_name=config, cache_dir=f"{tmp}/cache", sources_dir=str(data_dir))
            builder.download_and_prepare()
            staged[config] = Path(tmp) / config / PARQUET_NAME
            staged[config].parent.mkdir(parents=True)
            dataset = builder.as_dataset(split="test")
            dataset.to_parquet(str(staged[config]))
            infos[config] = (dataset.features, loaded_sizes(staged[config], Path(tmp) / "loaded" / config))
        for config, path in staged.items():
            target = parquet_path(out_root, config)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), target)
        (out_root / NOTICES_NAME).write_text(notices, encoding="utf-8")
        return card_yaml(infos)


@dataclass(frozen=True)
class SplitSizes:
    """What `datasets` reports for a one-split config once loaded from its Parquet file."""

    num_examples: int
    num_bytes: int  # in-memory Arrow size of the split; with one split, also the config's `dataset_size`
    download_size: int  # bytes of the Parquet file


def loaded_sizes(parquet: Path, cache_dir: Path) -> SplitSizes:
    """Load `parquet` the way `load_dataset` loads the Hub's files and return the sizes it records.

    The Arrow size is taken from the loaded dataset rather than from the builder that wrote the file: the Parquet
    reader's batches count a few bytes more than the builder's, and the card must show what users see.
    """
    import datasets

    info = datasets.load_dataset("parquet", data_files={"test": str(parquet)}, split="test",
                                 cache_dir=str(cache_dir)).info
    split = info.splits["test"]
    return SplitSizes(num_examples=split.num_examples, num_bytes=split.num_bytes, download_size=parquet.stat().st_size)


def card_yaml(configs: dict[str, tuple[Any, SplitSizes]]) -> dict[str, Any]:
    """The card's `configs:` and `dataset_info:` entries, the Hub's view of the Parquet files."""
    return {
        "configs": [
            {"config_name": name, "data_files": [{"split": "test", "path": f"data/{name}/test-*.parquet"}],
             **({"default": True} if name == "tasks" else {})}
            for name in configs
        ],
        "dataset_info": [
            {"config_name": name, "features": features._to_yaml_list(),
             "splits": [{"name": "test", "num_bytes": sizes.num_bytes, "num_examples": sizes.num_examples}],
             "download_size": sizes.download_size, "dataset_size": sizes.num_bytes}
            for name, (features, sizes) in configs.items()
        ],
    }


def write_front_matter(readme: Path, generated: dict[str, Any]) -> None:
    """Replace the generated keys of the README's YAML front matter, keeping the hand-written keys and the body."""
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""  # a fresh --out-dir starts a card
    meta, body = split_front_matter(text)
    meta.update(generated)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=120)
    readme.write_text(f"---\n{front}---\n{body}", encoding="utf-8")


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """A card's YAML front matter and the body after it; text without front matter gives `{}` and itself."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end]) or {}, text[end + 5:]


def check(builder_cls: type, data_dir: Path, root: Path) -> list[str]:
    """Rebuild in a scratch folder; return the files that differ from the committed ones (empty when identical)."""
    with tempfile.TemporaryDirectory() as tmp:
        generated = export(builder_cls, data_dir, Path(tmp))
        expected = [parquet_path(Path(), c) for c in FEATURES] + [Path(NOTICES_NAME)]
        differing = [
            str(rel) for rel in expected
            if not (root / rel).exists() or not filecmp.cmp(Path(tmp) / rel, root / rel, shallow=False)
        ]
    readme = root / "README.md"
    meta, _ = split_front_matter(readme.read_text(encoding="utf-8")) if readme.exists() else ({}, "")
    if any(meta.get(key) != value for key, value in generated.items()):
        differing.append("README.md (front matter)")
    return differing


def main(builder_cls: type, argv: list[str] | None = None) -> None:
    """Command line of `AsynCodeBench.py`; exits 0 when done or up to date, 1 when out of date, 2 on bad sources."""
    parser = argparse.ArgumentParser(
        description="Export the AsynCodeBench Parquet files, card YAML and notices from data/.")
    parser.add_argument("--check", action="store_true",
                        help="rebuild and compare with the committed files; write nothing")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "data", help="the sources (default: data/)")
    parser.add_argument("--out-dir", type=Path, default=ROOT,
                        help="the folder holding data/<config>/, README.md and THIRD_PARTY_NOTICES.md "
                             "(default: the repository root)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        if args.check:
            differing = check(builder_cls, args.data_dir, args.out_dir)
            if differing:
                print("out of date (run `python AsynCodeBench.py` and commit):\n  " + "\n  ".join(differing))
                sys.exit(1)
            print(f"up to date: a fresh build is byte-identical ({time.perf_counter() - started:.1f} s)")
            sys.exit(0)
        generated = export(builder_cls, args.data_dir, args.out_dir)
        write_front_matter(args.out_dir / "README.md", generated)
    except SourceError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
    for config in FEATURES:
        print(f"wrote {parquet_path(args.out_dir, config)}")
    print(f"wrote {args.out_dir / NOTICES_NAME}")
    print(f"updated the README.md front matter ({time.perf_counter() - started:.1f} s)")
    sys.exit(0)


def write_rows(rows: Any, out_root: Path) -> None:
    """Write already validated rows as a published folder (`data/<config>/test-00000-of-00001.parquet`).

    For datasets made outside the release sources, such as the demo task pinned to the image built on this machine.
    """
    import datasets

    for config, rows_of in rows.by_config().items():
        target = parquet_path(out_root, config)
        target.parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_list(rows_of, features=FEATURES[config]).to_parquet(str(target))
