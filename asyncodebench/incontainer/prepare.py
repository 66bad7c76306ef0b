"""Prepare the task workspace inside its container: base state, overlays, the patch, then protect grading.

Runs before any evaluated code, with the task's interpreter (standard library only, Python >= 3.6). Reads
`<io>/prepare.json` and prints its record as one JSON line. Nothing from the patch executes here: it is applied as
data.
"""

import json
import os
import subprocess
import sys

HAZARD_NAMES = {
    "conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
    "sitecustomize.py", "usercustomize.py",
}
IDENTITY = {
    "GIT_AUTHOR_NAME": "asyncodebench", "GIT_AUTHOR_EMAIL": "harness@asyncodebench.invalid",
    "GIT_COMMITTER_NAME": "asyncodebench", "GIT_COMMITTER_EMAIL": "harness@asyncodebench.invalid",
}


def git(*args, check=True):
    done = subprocess.run(("git",) + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=dict(os.environ, **IDENTITY))
    text = done.stdout.decode("utf-8", "replace")
    if check and done.returncode != 0:
        raise RuntimeError("git %s failed: %s" % (" ".join(args), text.strip()))
    return done.returncode, text


def lines(text):
    return [line for line in text.splitlines() if line]


def reset_to_base(base):
    git("-c", "safe.directory=*", "config", "--global", "--add", "safe.directory", "*", check=False)
    git("reset", "--hard", "-q", base)
    git("clean", "-ffdxq")
    return git("rev-parse", "HEAD")[1].strip()


def apply_overlays(paths):
    for path in paths:
        git("apply", "--whitespace=nowarn", path)
    if paths:
        git("add", "-A")
        git("commit", "-q", "-m", "asyncodebench overlays")
    return git("rev-parse", "HEAD")[1].strip()


def apply_patch(path):
    """Apply with git; fall back to patch(1) with fuzz, as other harnesses do. Returns (status, log)."""
    if os.path.getsize(path) == 0:
        return "empty", ""
    code, log = git("apply", "--binary", "--whitespace=nowarn", path, check=False)
    if code == 0:
        return "applied", log
    try:
        done = subprocess.run(["patch", "--batch", "--forward", "--fuzz=5", "-p1", "-i", path],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError:
        return "failed", log
    if done.returncode == 0:
        return "applied_with_fuzz", log + done.stdout.decode("utf-8", "replace")
    git("reset", "--hard", "-q")
    git("clean", "-ffdxq")
    return "failed", log + done.stdout.decode("utf-8", "replace")


def changed_since(ref, pathspec):
    tracked = lines(git("diff", "--name-only", "--no-renames", ref, "--", *pathspec)[1])
    untracked = lines(git("ls-files", "--others", "--", *pathspec)[1])
    return tracked, untracked


def exists_at(ref, path):
    return git("cat-file", "-e", "%s:%s" % (ref, path), check=False)[0] == 0


def put_back(ref, paths):
    """Return each path to its state at `ref`: checked out if it existed there, deleted if not."""
    for path in paths:
        if exists_at(ref, path):
            git("checkout", ref, "--", path)
        elif os.path.lexists(path):
            os.remove(path)


def is_hazard(path):
    name = os.path.basename(path)
    return name in HAZARD_NAMES or name.endswith(".pth")


def main():
    io_dir = sys.argv[1]
    with open(os.path.join(io_dir, "prepare.json")) as handle:
        cfg = json.load(handle)
    os.chdir(cfg["workdir"])
    record = {"base_head": reset_to_base(cfg["base_revision"])}
    record["canonical_ref"] = apply_overlays(cfg["overlays"])
    record["patch_status"], record["patch_log"] = apply_patch(cfg["patch"])
    tracked, untracked = changed_since(record["canonical_ref"], cfg["protected_paths"])
    put_back(record["canonical_ref"], tracked + untracked)
    record["restored_paths"], record["untracked_paths_removed"] = tracked, untracked
    tracked, untracked = changed_since(record["canonical_ref"], ["."])
    hazards = [p for p in tracked + untracked if is_hazard(p)]
    put_back(record["canonical_ref"], hazards)
    record["hazards_removed"] = hazards
    record["changed_paths"] = [p for p in tracked + untracked if p not in hazards]
    git("add", "-A")
    git("commit", "-q", "--allow-empty", "-m", "asyncodebench evaluated state")
    sys.stdout.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
