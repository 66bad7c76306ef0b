"""Turn a finished run into a model repo's Hub Eval Results files; print them, write them, or push them.

    python scripts/publish_results.py runs/try1 --model-repo my-org/my-agent              # dry run: print the files
    python scripts/publish_results.py runs/try1 --model-repo my-org/my-agent --out ./repo  # write them into a checkout
    HF_TOKEN=... python scripts/publish_results.py runs/try1 --model-repo my-org/my-agent --push [--create-pr]

Per protocol the model ran, `.eval_results/asyncodebench_<protocol>.yaml` holds its final success rate in percent
for the task of the dataset's eval.yaml of that name, the dataset's commit, the run's date and, in `notes`, the kit
version, the run id and a digest of the image set; `asyncodebench_runs/<run id>.json` beside it lists every image's
pinned reference and the run's summary rows. Each results file is checked against schemas/eval_results.schema.json
before anything is written. A run on a local dataset folder needs --dataset-id and --dataset-revision (the Hub commit
those rows were published at); a run with several models needs --model. A result whose trust status is
`needs_review` (high-severity review flags) is published only when --review-file names it as cleared (who, when,
why; schemas/review_clearance.schema.json); the file's entries go into the provenance and beside it.

Exit codes: 0 printed, written or pushed; 2 bad arguments (no run folder, an unfinished run, a missing or malformed
repo id, no HF_TOKEN for --push, a needs_review result not cleared, a bad review file); 3 the Hub refused or
could not be reached.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from asyncodebench import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="the run folder scripts/evaluate.py wrote (runs/<run id>)")
    parser.add_argument("--model-repo", required=True, help="the Hub model repo to publish to, ORG/NAME")
    parser.add_argument("--model", help="the run's model_name_or_path to publish (needed when the run holds several)")
    parser.add_argument("--dataset-id", help="the Hub dataset the rows are (default: the run's, when it read the Hub)")
    parser.add_argument("--dataset-revision", help="the dataset's 40-hex commit (default: the run's resolved commit)")
    parser.add_argument("--review-file", type=Path,
                        help="JSON naming each needs_review result cleared, by whom, when and why")
    parser.add_argument("--out", type=Path, help="write the files under this folder (a checkout of the model repo)")
    parser.add_argument("--push", action="store_true", help="commit the files to the model repo (needs HF_TOKEN)")
    parser.add_argument("--create-pr", action="store_true", help="with --push: open a pull request instead")
    args = parser.parse_args(argv)
    # Imported after parsing, so --help loads no heavy dependency (tests/test_script_help.py).
    from huggingface_hub import constants

    from asyncodebench.reports.eval_results import (
        ResultsError,
        build_files,
        load_finished_report,
        load_review_file,
        push,
        write_files,
    )
    from asyncodebench.untrusted import terminal_text

    try:
        report = load_finished_report(args.run_dir)
        review = load_review_file(args.review_file) if args.review_file else None
        files = build_files(report, args.model_repo, constants.ENDPOINT, model=args.model,
                            dataset_id=args.dataset_id, revision=args.dataset_revision, review=review)
    except ResultsError as exc:
        print(f"error: {terminal_text(exc)}", file=sys.stderr)  # it may name the run's models
        return cli.EXIT_BAD_ARGUMENTS
    if args.out:
        write_files(files, args.out)
        for f in files:
            print(terminal_text(f"wrote {args.out / f.path}"))
    if not args.push:
        if not args.out:
            for f in files:
                text = terminal_text(f.text, newlines=True)  # the files carry the run's model name and ids
                print(f"--- {terminal_text(f.path)}\n{text}", end="" if text.endswith("\n") else "\n")
            print(f"dry run: would commit {len(files)} files to {args.model_repo}; add --push to send them")
        return cli.EXIT_OK
    token = os.environ.get("HF_TOKEN")
    if not token:
        print("error: set HF_TOKEN to a write token for the model repo, or leave out --push for a dry run",
              file=sys.stderr)
        return cli.EXIT_BAD_ARGUMENTS
    try:
        url = push(files, args.model_repo, token, args.create_pr)
    except Exception as exc:  # huggingface_hub raises HTTP and connection errors of several kinds
        print(terminal_text(f"error: the Hub at {constants.ENDPOINT} refused or did not answer "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); check the "
                            f"token's write access to {args.model_repo} and HF_ENDPOINT, then rerun"), file=sys.stderr)
        return cli.EXIT_INFRASTRUCTURE
    print(f"pushed {len(files)} files to {args.model_repo}: {url}")
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
