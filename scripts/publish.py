"""Assemble the Hub folder of AsynCodeBench and, given a token, upload it and tag the release.

    python scripts/publish.py build/hub --dry-run          # assemble and list what would be sent
    python scripts/publish.py build/hub                    # assemble, upload, tag v0.4.2 (this script's one job)
    python scripts/publish.py build/hub --dataset my-org/AsynCodeBench --revision v0.4.3

The folder gets the card, eval.yaml, the Parquet files, the license files, the citation and the docs/ pages the card
links to, never the builder; each file is listed with its size and the start of its SHA-256. It uploads unless
--dry-run is given (uploading is its whole job). --repo-id and --tag, the names of 0.4.2, still work for this release,
with a warning. The token is the one huggingface_hub finds: HF_TOKEN, else the one `hf auth login` saved.

Exit codes: 0 assembled (and uploaded); 2 bad arguments (a folder that is not new and empty or cannot be written, a
malformed repo id or tag, no token without --dry-run); 3 the Hub refused or could not be reached.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
# A git tag the Hub takes: letters, digits, '.', '_', '-', not starting with '.' or '-', no '..' or '.lock' end.
TAG = re.compile(r"^(?!.*\.\.)(?!.*\.lock$)[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def repo_id(text: str) -> str:
    if not REPO_ID.match(text) or "--" in text or ".." in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a Hub dataset id: give it as ORG/NAME (letters, digits, "
                                         "'.', '_', '-')")
    return text


def tag(text: str) -> str:
    if not TAG.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a usable tag: give letters, digits, '.', '_' and '-', "
                                         "starting with a letter or digit, such as v0.4.2")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
    parser.add_argument("out_dir", type=Path, help="a new (or empty) folder to assemble the Hub files in")
    parser.add_argument("--dataset", dest="repo_id", type=repo_id, default=DEFAULT_DATASET,
                        help="the Hub dataset to upload to")
    parser.add_argument("--revision", dest="tag", type=tag, default=DEFAULT_REVISION,
                        help="the tag the release's commit gets (a new one)")
    parser.add_argument("--dry-run", action="store_true",
                        help="assemble and list the files; upload nothing (uploading is this script's job, so it "
                             "uploads without this)")
    # The names of 0.4.2 and before, for one release.
    parser.add_argument("--repo-id", action=cli.DeprecatedAlias, new="--dataset", dest="repo_id", type=repo_id)
    parser.add_argument("--tag", action=cli.DeprecatedAlias, new="--revision", dest="tag", type=tag)
    args = parser.parse_args(argv)
    problem = cli.writable_folder_problem(args.out_dir) if not args.out_dir.is_file() else \
        f"{args.out_dir} is a file"
    if problem is None and any(args.out_dir.iterdir()):
        problem = f"{args.out_dir} is not empty (assembling there could mix other files into the release)"
    if problem:
        parser.error(f"{problem}; give a new folder")
    from huggingface_hub import constants, get_token

    from asyncodebench.dataset.publish import assemble, upload  # after parsing: `datasets` takes a second to import

    token = None if args.dry_run else get_token()  # HF_TOKEN, else the token `hf auth login` saved
    if not args.dry_run and not token:
        print("error: no Hugging Face token: run `hf auth login` or set HF_TOKEN to a write token for the "
              "repository, or pass --dry-run", file=sys.stderr)
        return cli.EXIT_BAD_ARGUMENTS
    try:
        files = assemble(args.out_dir)
    except OSError as exc:  # a file missing from the kit, or the folder filled meanwhile
        print(f"error: cannot assemble the Hub folder in {args.out_dir}: {exc}", file=sys.stderr)
        return cli.EXIT_BAD_ARGUMENTS
    for f in files:
        print(f"{f.size:>10}  {f.sha256[:16]}  {f.path}")
    if args.dry_run:
        print(f"dry run: would upload {len(files)} files to datasets/{args.repo_id} and tag {args.tag}")
        return cli.EXIT_OK
    assert token is not None  # checked above, before anything was assembled
    try:
        commit = upload(args.out_dir, args.repo_id, args.tag, token)
    except Exception as exc:  # huggingface_hub raises HTTP and connection errors of several kinds
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"error: the Hub at {constants.ENDPOINT} refused or did not answer ({type(exc).__name__}: {first}); "
              f"check the token's write access to datasets/{args.repo_id}, that --revision {args.tag} is a new tag, "
              "and "
              "HF_ENDPOINT, then rerun into a new folder", file=sys.stderr)
        return cli.EXIT_INFRASTRUCTURE
    print(f"uploaded datasets/{args.repo_id} at {commit}, tagged {args.tag}")
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
