"""Read what a unified diff touches, and refuse diffs that reach outside the repository.

Pure text work: no git, no files. Used before a patch enters a container and for agents' scope checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

_DIFF_GIT = re.compile(r"^diff --git (\S+) (\S+)$")
_HEADER = re.compile(r"^(?:---|\+\+\+) (\S+)")
_RENAME = re.compile(r"^(?:rename|copy) (?:from|to) (.+)$")
_QUOTED = re.compile(r'^"(.*)"$')


@dataclass(frozen=True)
class PatchPaths:
    """The repository paths a diff touches, and the ones that make it unsafe to apply."""

    paths: tuple[str, ...]
    unsafe: tuple[str, ...]  # absolute, `..`, or inside `.git`
    binary: bool


def patch_text(patch: str | bytes | None) -> str:
    """A patch as text; bytes that are not UTF-8 are kept via surrogate escapes, so nothing is lost."""
    if patch is None:
        return ""
    if isinstance(patch, bytes):
        return patch.decode("utf-8", errors="surrogateescape")
    return patch


def patch_bytes(patch: str | None) -> bytes:
    """A patch as the bytes to apply: text that came from invalid UTF-8 holds surrogate escapes, which become the
    original bytes again (the inverse of `patch_text`); other lone surrogates from JSON escapes pass through."""
    try:
        return (patch or "").encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return (patch or "").encode("utf-8", errors="surrogatepass")


def touched_paths(patch: str) -> PatchPaths:
    """Every path named by the diff's headers (`diff --git`, `---`/`+++`, rename/copy lines)."""
    found: list[str] = []
    binary = False
    for line in patch.splitlines():
        if line.startswith("GIT binary patch") or (line.startswith("Binary files ") and line.endswith(" differ")):
            binary = True
        names: list[str] = []
        if match := _DIFF_GIT.match(line):
            names = [_strip_prefix(match.group(1)), _strip_prefix(match.group(2))]
        elif match := _HEADER.match(line):
            names = [_strip_prefix(match.group(1))]
        elif match := _RENAME.match(line):
            names = [match.group(1)]
        found += [n for n in (_unquote(n) for n in names) if n and n != "/dev/null"]
    paths = tuple(dict.fromkeys(found))
    return PatchPaths(paths, tuple(p for p in paths if not is_safe_path(p)), binary)


def _strip_prefix(name: str) -> str:
    name = _unquote(name)
    return name[2:] if name[:2] in ("a/", "b/") else name


def _unquote(name: str) -> str:
    match = _QUOTED.match(name)
    return match.group(1) if match else name


def is_safe_path(path: str) -> bool:
    """Relative, no `..` component, not inside `.git`."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not path.startswith("/") and ".." not in parts and parts[0] != ".git"


def outside_scope(paths: tuple[str, ...], writable: tuple[str, ...]) -> tuple[str, ...]:
    """The paths not covered by `writable` (a writable entry is a file, or a folder ending with `/`)."""
    def allowed(path: str) -> bool:
        return any(path == w or (w.endswith("/") and path.startswith(w)) for w in writable)

    return tuple(p for p in paths if not allowed(p))
