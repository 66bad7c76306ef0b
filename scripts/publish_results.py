"""Turn a finished run into a model repo's Hub Eval Results files; print them, write them, or push them.

    python scripts/publish_results.py runs/try1 --model-repo my-org/my-agent              # dry run: print the files
    python scripts/publish_results.py runs/try1 --model-repo my-org/my-agent --output-dir ./repo  # write them
    python scripts/publish_results.py runs/try1 --model-repo my-org/my-agent --push [--create-pr]   # upload

Only a complete, official run is published: every task of the release scored under each protocol the model ran (no
infrastructure error left), on the rows of the dataset's commit (a Hub run's resolved commit, or a local folder whose
Parquet files have the same digest), every image by the release's pinned digest, the official settings, and each
`needs_review` result cleared by --review-file (who, when, why; schemas/review_clearance.schema.json). To check, the
release's Parquet files are read from the Hub (HF_ENDPOINT) at that commit. Anything else is refused with the reason
and the command that completes the run; --allow-partial prints the files of such a run, marked unpublishable, and
writes or pushes nothing.

Per protocol, `.eval_results/asyncodebench_<protocol>.yaml` holds the final success rate in percent for the task of
eval.yaml of that name, the dataset's commit, the run's date and, in `notes`, the kit version, the run id and a
digest of the image set; `asyncodebench_runs/<run id>.json` beside it (the target of `source.url`; with --create-pr
its URL names the pull request's ref) lists every image's pinned reference and the run's summary rows, and no local
path. The results files are written with huggingface_hub's own types and checked against
schemas/eval_results.schema.json. The token is the one huggingface_hub finds: HF_TOKEN, else `hf auth login`'s.

Exit codes: 0 printed, written or pushed; 2 bad arguments (no run folder, an unfinished, partial or unofficial run,
a missing or malformed repo id, no token for --push, a needs_review result not cleared, a bad review file, an
--output-dir that cannot be written); 3 the Hub refused or could not be reached.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from asyncodebench import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
    parser.add_argument("run_dir", type=Path, help="the run folder scripts/evaluate.py wrote (runs/<run id>)")
    parser.add_argument("--model-repo", required=True, help="the Hub model repo to publish to, ORG/NAME")
    parser.add_argument("--model", help="the run's model_name_or_path to publish (needed when the run holds several)")
    parser.add_argument("--dataset", dest="dataset_id",
                        help="the Hub dataset the rows are, ORG/NAME (unset: the run's, when it read the Hub)")
    parser.add_argument("--revision", dest="dataset_revision",
                        help="the dataset's 40-hex commit (unset: the run's resolved commit)")
    parser.add_argument("--review-file", type=Path,
                        help="JSON naming each needs_review result cleared, by whom, when and why")
    parser.add_argument("--output-dir", dest="out", type=Path,
                        help="write the files under this folder (a checkout of the model repo; unset: print them)")
    parser.add_argument("--push", action="store_true", help="commit the files to the model repo (needs a token)")
    parser.add_argument("--create-pr", action="store_true", help="with --push: open a pull request instead")
    parser.add_argument("--allow-partial", action="store_true",
                        help="dry run only: print the files of a run that may not be published, marked so")
    # The names of 0.4.2 and before, for one release.
    parser.add_argument("--dataset-id", action=cli.DeprecatedAlias, new="--dataset", dest="dataset_id")
    parser.add_argument("--dataset-revision", action=cli.DeprecatedAlias, new="--revision", dest="dataset_revision")
    parser.add_argument("--out", action=cli.DeprecatedAlias, new="--output-dir", dest="out", type=Path)
    args = parser.parse_args(argv)
    if args.allow_partial and (args.out or args.push):
        parser.error("--allow-partial is for a dry run only: leave out --output-dir and --push (nothing of a "
                     "partial run may be published)")
    if args.out and args.out.exists() and not args.out.is_dir():
        parser.error(f"--output-dir {args.out} is a file: give a folder (a checkout of the model repo)")
    if args.create_pr and not args.push:
        parser.error("--create-pr opens a pull request when pushing: add --push, or leave it out for a dry run")
    # Imported after parsing, so --help loads no heavy dependency (tests/test_script_help.py).
    from huggingface_hub import constants, get_token

    from asyncodebench.reports.eval_results import (
        ResultsError,
        ResultsFile,
        build_files,
        dataset_ref,
        load_finished_report,
        load_review_file,
        pick_model,
        publication_problems,
        push,
        write_files,
    )
    from asyncodebench.reports.release import ReleaseNotFoundError, ReleaseUnavailableError, fetch_release
    from asyncodebench.untrusted import terminal_text

    def refuse(message: str, code: int = cli.EXIT_BAD_ARGUMENTS, details: tuple[str, ...] = ()) -> int:
        # Each line made inert on its own: the messages name the run's models, whose text may hold line breaks.
        lines = [f"error: {message}", *(f"  - {d}" for d in details)]
        print("\n".join(terminal_text(line) for line in lines), file=sys.stderr)
        return code

    try:
        report = load_finished_report(args.run_dir)
        review = load_review_file(args.review_file) if args.review_file else None
        model = pick_model(report, args.model)
        dataset_id, revision = dataset_ref(report, args.dataset_id, args.dataset_revision)

        def files_at(repo_revision: str) -> list[ResultsFile]:
            return build_files(report, args.model_repo, constants.ENDPOINT, model=model, dataset_id=dataset_id,
                               revision=revision, review=review, repo_revision=repo_revision)

        files = files_at("main")
    except ResultsError as exc:
        return refuse(str(exc))
    token = get_token() if args.push else None  # HF_TOKEN, else the token `hf auth login` saved
    if args.push and not token:
        return refuse("no Hugging Face token: run `hf auth login` or set HF_TOKEN to a write token for the model "
                      "repo, or leave out --push for a dry run")
    try:
        problems = publication_problems(report, model, fetch_release(dataset_id, revision))
    except ReleaseNotFoundError as exc:
        return refuse(str(exc))
    except ReleaseUnavailableError as exc:
        if not args.allow_partial:
            return refuse(str(exc), cli.EXIT_INFRASTRUCTURE)
        problems = [f"not checked against the release: {exc}"]
    if problems and not args.allow_partial:
        return refuse(f"{model} in run {report['run']['run_id']} is not a complete, official run of {dataset_id}@"
                      f"{revision}, so it is not published (--allow-partial prints its files as a dry run, marked "
                      "unpublishable):", details=tuple(problems))
    if args.out:
        try:
            write_files(files, args.out)
        except OSError as exc:
            return refuse(f"cannot write under --output-dir {args.out} ({exc.strerror or exc}): give a writable "
                          "folder, such as a checkout of the model repo")
        for f in files:
            print(terminal_text(f"wrote {args.out / f.path}"))
    if not args.push:
        if not args.out:
            for f in files:
                text = terminal_text(f.text, newlines=True)  # the files carry the run's model name and ids
                print(f"--- {terminal_text(f.path)}\n{text}", end="" if text.endswith("\n") else "\n")
            if problems:
                print("\n".join(terminal_text(line) for line in
                                ["NOT PUBLISHABLE: the run is not a complete, official run:",
                                 *(f"  - {p}" for p in problems)]))
                print(f"dry run (--allow-partial): {len(files)} files shown; nothing may be written or pushed")
            else:
                print(f"dry run: would commit {len(files)} files to {args.model_repo}; add --push to send them")
        return cli.EXIT_OK
    assert token is not None  # checked above, before the release was read
    try:
        url = push(files_at, args.model_repo, token, args.create_pr)
    except Exception as exc:  # huggingface_hub raises HTTP and connection errors of several kinds
        return refuse(f"the Hub at {constants.ENDPOINT} refused or did not answer ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}); check the token's write access to "
                      f"{args.model_repo} and HF_ENDPOINT, then rerun", cli.EXIT_INFRASTRUCTURE)
    print(f"pushed {len(files)} files to {args.model_repo}: {url}")
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
