"""An agent workspace's disk: whether the tmpfs an agent writes (its work tree, its private /tmp and HOME) is full,
and the removal of its scratch files when it is.

A full tmpfs makes every later write fail ("No space left on device"), including git's when the trusted side reads
the agent's patch, so a scratch file could cost the agent its in-scope work. The scratch the runner may remove is
what can never be part of a kept artifact: the untracked files outside the agent's writable paths (git's own list,
ignored files left alone, since the start state may hold some) and everything under /tmp (its HOME emptied, kept).
The removal runs as the sandbox user, so it can remove only what the agent itself could (a symlink planted in the
tree cannot turn it against anything else); the list is made by root's git with the trusted configuration, as the
patch is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from asyncodebench.harness.sandbox import SANDBOX_UID, Sandbox
from asyncodebench.harness.workspace import HOME_DIR

TMP_DIR = "/tmp"
NO_SPACE = ("No space left on device", "Disk quota exceeded")  # ENOSPC, EDQUOT as commands print them
# A filesystem with less free than this is full: a bigger write would fail, and git needs room for the index.
FREE_BYTES, FREE_INODES = 1 << 20, 64
REMOVAL_SECONDS = 120
ARGV_BYTES = 64 << 10  # of paths per removal command (the kernel takes more; a bound keeps each exec small)
# Prints, as JSON, each folder's size and free space in bytes and its free inodes (statvfs needs no space).
MEASURE = (
    "import json, os, sys\n"
    "out = {}\n"
    "for folder in sys.argv[1:]:\n"
    "    try:\n"
    "        s = os.statvfs(folder)\n"
    "        out[folder] = [s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize, s.f_favail]\n"
    "    except OSError:\n"
    "        pass\n"
    "print(json.dumps(out))\n"
)
# Run as the sandbox user: removes the work-tree paths given as JSON (relative, files git listed) and, with
# "tmp", everything under /tmp but HOME, whose contents go too; prints the paths it removed.
REMOVE = (
    "import json, os, shutil, sys\n"
    "workdir, paths, tmp, home = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == 'tmp', sys.argv[4]\n"
    "removed = []\n"
    "def gone(path):\n"
    "    try:\n"
    "        if os.path.isdir(path) and not os.path.islink(path):\n"
    "            shutil.rmtree(path, ignore_errors=True)\n"
    "        else:\n"
    "            os.unlink(path)\n"
    "        return True\n"
    "    except OSError:\n"
    "        return False\n"
    "for path in paths:\n"
    "    if gone(os.path.join(workdir, path)):\n"
    "        removed.append(path)\n"
    "if tmp:\n"
    "    for folder in ('/tmp', home):\n"
    "        for name in os.listdir(folder) if os.path.isdir(folder) else []:\n"
    "            full = os.path.join(folder, name)\n"
    "            if full != home and gone(full):\n"
    "                removed.append(full)\n"
    "print(json.dumps(removed))\n"
)


@dataclass(frozen=True)
class Space:
    """One filesystem of the workspace: its size and free bytes, and its free inodes."""

    folder: str
    size: int
    free: int
    free_inodes: int

    @property
    def full(self) -> bool:
        """Whether a write of some size would fail there."""
        return self.free < min(FREE_BYTES, self.size // 20) or self.free_inodes < FREE_INODES


def mentions_no_space(output: str) -> bool:
    """Whether a command's output says a write failed for want of space."""
    return any(text in output for text in NO_SPACE)


def measure(box: Sandbox, interpreter: str, folders: tuple[str, ...]) -> list[Space]:
    """The folders' filesystems as the container sees them (none when the measure could not run)."""
    done = box.exec([interpreter, "-I", "-c", MEASURE, *folders], 60)
    try:
        value = json.loads(done.output.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return []
    return [Space(f, *map(int, v)) for f, v in value.items() if isinstance(v, list) and len(v) == 3]


def remove_scratch(box: Sandbox, interpreter: str, workdir: str, paths: list[str], clear_tmp: bool) -> list[str]:
    """Remove `paths` (relative to `workdir`) and, with `clear_tmp`, the agent's /tmp, as the sandbox user; the
    paths removed (those under /tmp absolute)."""
    batches: list[list[str]] = [[]]
    for path in paths:
        if batches[-1] and len(json.dumps(batches[-1] + [path])) > ARGV_BYTES:
            batches.append([])
        batches[-1].append(path)
    removed: list[str] = []
    for number, batch in enumerate(batches):
        tmp = "tmp" if clear_tmp and number == len(batches) - 1 else "-"
        done = box.exec([interpreter, "-I", "-c", REMOVE, workdir, json.dumps(batch), tmp, HOME_DIR],
                        REMOVAL_SECONDS, user=str(SANDBOX_UID))
        removed += _paths(done.output)
    return removed


def _paths(output: bytes) -> list[str]:
    try:
        value: Any = json.loads(output.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return []
    return [str(p) for p in value] if isinstance(value, list) else []
