"""Read what a unified diff touches, and refuse diffs that reach outside the repository.

Pure text work: no git, no files. Used before a patch enters a container and for agents' scope checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

_HEADER = re.compile(r"^(?:---|\+\+\+|\*\*\*) (.+)$")  # unified and context diff file headers
_NAMED = re.compile(r"^(?:rename|copy) (?:from|to) (.+)$|^Index: (.+)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_OCTAL = re.compile(r"[0-3][0-7]{2}")


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
    """Every path named by the diff's headers (`diff --git`, `---`/`+++`/`***`, rename/copy, `Index:`), with
    git's C-style quoting decoded first, so an escaped name is checked as what it really names."""
    found: list[str] = []
    binary = False
    for line in patch.splitlines():
        if line.startswith("GIT binary patch") or (line.startswith("Binary files ") and line.endswith(" differ")):
            binary = True
        names: list[str] = []
        if line.startswith("diff --git "):
            names = [_strip_prefix(n) for n in _split_git_header(line[len("diff --git "):])]
        elif match := _HEADER.match(line):
            names = [_strip_prefix(_one_name(match.group(1).split("\t")[0]))]
        elif match := _NAMED.match(line):
            names = [_one_name(match.group(1) or match.group(2))]
        found += [n for n in names if n and n != "/dev/null"]
    paths = tuple(dict.fromkeys(found))
    return PatchPaths(paths, tuple(p for p in paths if not is_safe_path(p)), binary)


def _one_name(text: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        name, _ = c_unquote(text)
        return name
    return text


def _split_git_header(rest: str) -> list[str]:
    """The two names of `diff --git A B`: quoted ones decoded; unquoted ones split where `a/X b/X` agree."""
    if rest.startswith('"'):
        first, used = c_unquote(rest)
        return [first, _one_name(rest[used:])]
    splits = [i for i in range(len(rest)) if rest.startswith(" b/", i) or rest.startswith(' "b/', i)]
    for i in splits:
        left, right = rest[:i], _one_name(rest[i + 1:])
        if left[2:] == right[2:]:
            return [left, right]
    return [rest[:splits[0]], _one_name(rest[splits[0] + 1:])] if splits else [rest]


def c_unquote(text: str) -> tuple[str, int]:
    r"""Decode a git C-quoted name starting at text[0] == '"'; return it and the characters used.

    Escapes: \a \b \t \n \v \f \r \" \\ and three octal digits (one byte each, so UTF-8 names
    arrive as several). An unknown escape keeps its backslash, which no safe name contains either.
    """
    out = bytearray()
    i = 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and i + 1 < len(text):
            if _OCTAL.match(text, i + 1):
                out.append(int(text[i + 1:i + 4], 8))
                i += 4
                continue
            if text[i + 1] in _ESCAPES:
                out.append(_ESCAPES[text[i + 1]])
                i += 2
                continue
        out += _raw(text[i])
        i += 1
    return out.decode("utf-8", "surrogateescape"), i + 1


def _raw(char: str) -> bytes:
    r"""The bytes of one character of a patch; a lone surrogate that no byte produced (a JSON escape such as
    \ud800) is kept as its UTF-8-like bytes rather than failing on hostile input."""
    try:
        return char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return char.encode("utf-8", "surrogatepass")


def _strip_prefix(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def is_safe_path(path: str) -> bool:
    """Relative, no `..` component, no `.git` component (any case), no backslash or NUL."""
    parts = PurePosixPath(path).parts
    return (bool(parts) and not path.startswith("/") and ".." not in parts
            and not any(part.lower() == ".git" for part in parts) and not any(c in path for c in "\\\0"))


def outside_scope(paths: tuple[str, ...], writable: tuple[str, ...]) -> tuple[str, ...]:
    """The paths not covered by `writable` (a writable entry is a file, or a folder ending with `/`)."""
    def allowed(path: str) -> bool:
        return any(path == w or (w.endswith("/") and path.startswith(w)) for w in writable)

    return tuple(p for p in paths if not allowed(p))
