"""Assemble the Hub folder of AsynCodeBench and, given a token, upload it and tag the release.

    python scripts/publish.py build/hub --dry-run          # assemble and list what would be sent
    HF_TOKEN=... python scripts/publish.py build/hub       # assemble, upload, tag v0.4.2

The folder gets the card, eval.yaml, the Parquet files, the license files, the citation and the docs/ pages the card
links to, never the builder; each file is listed with its size and the start of its SHA-256.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="a new folder to assemble the Hub files in")
    parser.add_argument("--repo-id", default=DEFAULT_DATASET)
    parser.add_argument("--tag", default=DEFAULT_REVISION)
    parser.add_argument("--dry-run", action="store_true", help="assemble and list the files; upload nothing")
    args = parser.parse_args(argv)
    from asyncodebench.dataset.publish import assemble, upload  # after parsing: `datasets` takes a second to import

    files = assemble(args.out_dir)
    for f in files:
        print(f"{f.size:>10}  {f.sha256[:16]}  {f.path}")
    if args.dry_run:
        print(f"dry run: would upload {len(files)} files to datasets/{args.repo_id} and tag {args.tag}")
        return 0
    token = os.environ.get("HF_TOKEN")
    if not token:
        print("set HF_TOKEN to a write token for the repository, or pass --dry-run", file=sys.stderr)
        return 2
    commit = upload(args.out_dir, args.repo_id, args.tag, token)
    print(f"uploaded datasets/{args.repo_id} at {commit}, tagged {args.tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
