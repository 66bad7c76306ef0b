#!/usr/bin/env python3
"""Find runs of 12 or more words that a task's prose shares with its upstream repository's prose.

    python scripts/check_prose_overlap.py asyncodebench:simpy --git-dir /path/to/simpy.git [--rev REV ...]

The task's prose is its problem statement (`data/tasks/<name>.md`) and the contract summaries of its dependency
points. The upstream prose is what a writer could have copied from: docstrings, string literals and comments of the
Python files, and the whole text of Markdown, reStructuredText and plain-text files, at each revision given
(default: the task's base revision and its parent, which holds the original code of Commit0 tasks). Words are
compared lower-cased, punctuation ignored, so reflowed or re-punctuated copies are found too.

Prints each shared run with where it occurs and exits 1 when there is any, 0 when there is none; `--json` prints
the result as JSON (what the audit records keep). The statement's code spans are prose too for this check: a
shared run that is only a signature or an expression is for the reader to judge.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = PROJECT_ROOT / "data" / "tasks"
RUN_WORDS = 12
PROSE_SUFFIXES = (".md", ".rst", ".txt")
WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def python_prose(source: str) -> str:
    """The strings and comments of a Python file (where docstrings and explanations live)."""
    pieces = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.STRING, tokenize.COMMENT):
                pieces.append(token.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source  # unparsable at this revision: compare the whole text rather than nothing
    return "\n".join(pieces)


def git(git_dir: Path, *args: str) -> str:
    result = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                            errors="replace", check=False)
    if result.returncode != 0:
        raise SystemExit(f"error: git {' '.join(args)} failed in {git_dir}: {result.stderr.strip()}")
    return result.stdout


def upstream_texts(git_dir: Path, rev: str) -> dict[str, str]:
    """Prose of every Python and documentation file at `rev`, by `path@rev`."""
    texts = {}
    for path in git(git_dir, "ls-tree", "-r", "--name-only", rev).splitlines():
        if not (path.endswith(".py") or path.endswith(PROSE_SUFFIXES)):
            continue
        blob = git(git_dir, "show", f"{rev}:{path}")
        texts[f"{path}@{rev[:12]}"] = python_prose(blob) if path.endswith(".py") else blob
    return texts


def task_prose(name: str) -> dict[str, str]:
    """The statement and each contract summary of a task, by where they live."""
    source = yaml.safe_load((TASKS_DIR / f"{name}.yaml").read_text())
    prose = {f"data/tasks/{name}.md": (TASKS_DIR / f"{name}.md").read_text()}
    for dep in source.get("dependencies") or []:
        prose[f"contract_summary of {dep['dependency_id']}"] = dep["contract_summary"]
    return prose


def shared_runs(ours: list[str], theirs: set[tuple[str, ...]]) -> list[str]:
    """Maximal runs of at least RUN_WORDS words of `ours` whose every RUN_WORDS-window is in `theirs`."""
    hits = [tuple(ours[i:i + RUN_WORDS]) in theirs for i in range(len(ours) - RUN_WORDS + 1)]
    runs, i = [], 0
    while i < len(hits):
        if not hits[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(hits) and hits[j + 1]:
            j += 1
        runs.append(" ".join(ours[i:j + RUN_WORDS]))
        i = j + 1
    return runs


def check(name: str, git_dir: Path, revs: list[str]) -> dict:
    windows: dict[tuple[str, ...], str] = {}
    for rev in revs:
        for where, text in upstream_texts(git_dir, rev).items():
            ws = words(text)
            for i in range(len(ws) - RUN_WORDS + 1):
                windows.setdefault(tuple(ws[i:i + RUN_WORDS]), where)
    findings = []
    for where, text in task_prose(name).items():
        for run in shared_runs(words(text), set(windows)):
            first = tuple(run.split()[:RUN_WORDS])
            findings.append({"in": where, "words": len(run.split()), "run": run, "upstream": windows[first]})
    return {"task": name, "revisions": revs, "run_words": RUN_WORDS, "shared_runs": findings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_id", help="asyncodebench:<name>")
    parser.add_argument("--git-dir", type=Path, required=True, help="the upstream repository (bare or .git)")
    parser.add_argument("--rev", action="append", default=None,
                        help="revision to compare against (repeatable; default: base revision and its parent)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    name = args.task_id.split(":", 1)[-1]
    if not (TASKS_DIR / f"{name}.yaml").is_file():
        parser.error(f"no task source data/tasks/{name}.yaml")
    base = yaml.safe_load((TASKS_DIR / f"{name}.yaml").read_text())["base_revision"]
    revs = args.rev or [base, git(args.git_dir, "rev-parse", f"{base}^").strip()]
    result = check(name, args.git_dir, revs)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for f in result["shared_runs"]:
            print(f"{f['in']}: {f['words']} words shared with {f['upstream']}:\n    {f['run']}")
        print(f"{len(result['shared_runs'])} shared run(s) of {RUN_WORDS}+ words against {', '.join(revs)}")
    return 1 if result["shared_runs"] else 0


if __name__ == "__main__":
    sys.exit(main())
