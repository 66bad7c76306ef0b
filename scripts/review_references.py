"""Review each task's reference solution as a prediction's patch is reviewed, and list its flags by severity.

    python scripts/review_references.py --repos /path/to/clones          # every task of data/tasks
    python scripts/review_references.py --repos /path/to/clones --tasks asyncodebench:flask

The review (asyncodebench/scoring/review.py) must raise no high-severity flag on honest code: this runs it on the
patch from each task's base revision to its reference revision (the audit record's, data/tasks/<name>.audit.yaml),
restricted to every agent's writable paths. The repositories are not part of the kit: `--repos` names a folder
holding one git repository (bare or not) per task repository, as `<owner>+<name>` or `<owner>+<name>/repo`
(docs/integrity.md has the last figures). Without it, each row's repository_url is cloned.

Exit codes:
  0  no reference solution raises a high-severity flag
  1  some reference solution does (listed: file, line, marker)
  2  bad arguments (an unknown task, a --repos folder that does not exist)
  3  a repository or a revision cannot be had
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from asyncodebench import cli
from asyncodebench.images import validation
from asyncodebench.images.task_build import BuildError
from asyncodebench.images.toolkit import cache_dir
from asyncodebench.scoring.review import patch_flags
from asyncodebench.untrusted import markdown_cell

TASKS = Path(__file__).resolve().parent.parent / "data" / "tasks"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--repos", type=Path, default=None,
                        help="folder of the task repositories (<owner>+<name>[/repo]); default: clone each row's URL")
    parser.add_argument("--tasks", nargs="+", default=None, metavar="TASK_ID", help="only these tasks")
    args = parser.parse_args(argv)
    if args.repos is not None and not args.repos.is_dir():
        parser.error(f"--repos {args.repos}: no such folder; give the folder that holds the task repositories")
    return args


def task_records(wanted: list[str] | None) -> list[tuple[dict, str]]:
    """(row, reference revision) of each task that has an audit record, in name order."""
    found = []
    for audit in sorted(TASKS.glob("*.audit.yaml")):
        row = yaml.safe_load((TASKS / audit.name.replace(".audit.yaml", ".yaml")).read_text())
        found.append((row, yaml.safe_load(audit.read_text())["revisions"]["reference"]))
    if wanted:
        unknown = sorted(set(wanted) - {row["task_id"] for row, _ in found})
        if unknown:
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"--tasks: no such task {', '.join(unknown)}; the tasks are "
                                                   f"{', '.join(row['task_id'] for row, _ in found)}")
        found = [(row, ref) for row, ref in found if row["task_id"] in wanted]
    return found


def repository(row: dict, repos: Path | None) -> str:
    """Where the task's repository is: under --repos when it holds it, else its URL."""
    url = row["repository_url"]
    if repos is None:
        return url
    name = url.removeprefix("https://github.com/").strip("/").replace("/", "+")
    for candidate in (repos / name / "repo", repos / name):
        if candidate.is_dir():
            return str(candidate)
    raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"--repos {repos} holds no {name} (nor {name}/repo) for {row['task_id']}")


def reference_flags(row: dict, reference: str, repos: Path | None) -> list[dict]:
    """The review flags of the task's reference solution."""
    paths = tuple(dict.fromkeys([*row.get("single_agent_writable_paths", []),
                                 *(p for a in row.get("specialists") or [] for p in a.get("writable_paths", []))]))
    where = repository(row, repos)
    try:
        if repos is None:  # the kit's own fetch into its cache, as the image builds do
            patch = validation.reference_patch(where, cache_dir(), row["base_revision"], reference, paths)[1]
        else:  # a clone of one's own is read as it is (a partial clone may not serve a fetch)
            patch = subprocess.run(["git", "--git-dir", git_dir(Path(where)), "diff", "--no-color", "--no-ext-diff",
                                    row["base_revision"], reference, "--", *paths],
                                   capture_output=True, check=True).stdout
    except (BuildError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace") if isinstance(exc, subprocess.CalledProcessError) else str(exc)
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, f"{row['task_id']}: {where}: {detail.strip()}") from exc
    return patch_flags(patch.decode("utf-8", errors="replace"))


def git_dir(repo: Path) -> str:
    """The git directory of a clone: its .git folder, or the folder itself when bare."""
    return str(repo / ".git") if (repo / ".git").exists() else str(repo)


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    high: list[str] = []
    print("| task | patch flags | high | low markers |\n|---|---|---|---|")
    for row, reference in task_records(args.tasks):
        flags = reference_flags(row, reference, args.repos)
        severe = [f for f in flags if f["severity"] == "high"]
        low = Counter(f["marker"] for f in flags if f["severity"] != "high")
        print(f"| {row['task_id']} | {len(flags)} | {len(severe)} | "
              f"{markdown_cell(', '.join(f'{m} {n}' for m, n in sorted(low.items())) or '-')} |")
        high += [f"{row['task_id']} {f['file']}:{f.get('line')} {f['marker']}" for f in severe]
    if high:
        print("High-severity flags on reference code (the review would send honest work to review):\n"
              + "\n".join(high))
    return cli.EXIT_PROBLEMS_FOUND if high else cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
