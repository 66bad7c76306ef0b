"""Review flags: what a prediction's patches add that touches the test runner, the tests or the interpreter, with a
severity (shown, and the high ones hold a result for review: `scoring.trust`; never a score).

Code under test runs in pytest's own process, so a patch can still reach into pytest from inside it (a known limit:
docs/integrity.md). A reader can tell such code from honest code by reading it; this module reads it first and
points the reader at what is worth reading. For every patch a prediction carries (final patch, checkpoint states,
agent patches), each file the patch adds or changes is analysed by kind:
- Python (`.py`, `.pyi`, `.pyw`): by its syntax tree (`scoring.review_python`). A file the patch creates is parsed
  whole, and one that does not parse is itself a low flag (`syntax_error`). A changed file is read from the new side
  of each hunk (its added and context lines): the hunk parsed as code where it parses, else each run of added lines,
  else each line, and what still does not parse is read by a text scan (one low `unparsed_code` per file). Imports
  anywhere in the file's hunks resolve aliases in all of them. Review runs on the host from the prediction alone
  (also under `--rescore`, with no container), so a changed file's lines outside its hunks are not seen: a name
  imported there and used in the hunk is read by its attribute (`._getframe`, `.f_back` mean the same on any object).
- C and C++ (and Cython) sources: a scan of the added lines, comments removed, for the Python C API, `dlsym`,
  `/proc/self`, `dlopen` and load-time constructors.
- Any other file: a text scan of the added lines for the same Python names (a payload read and run at run time).
Each flag gives the file, the line in the new file, the marker, the line's text and its severity
(`review_markers.MARKERS`); any `.gitattributes` or `.gitmodules` in a diff is named too.

Everything here is pure work over hostile input: it never raises (whatever the text), runs in bounded time per line
and per piece of code, and returns only printable, valid text. Flags are hints for people, never a score.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from asyncodebench.scoring.patches import c_unquote
from asyncodebench.scoring.review_markers import MARKERS, severity_of
from asyncodebench.scoring.review_python import analyse, import_aliases
from asyncodebench.scoring.review_text import (
    NATIVE_SUFFIXES,
    PYTHON_SUFFIXES,
    NativeScanner,
    string_pieces_markers,
    text_markers,
)

REVIEW_CAP = 100
"""How many flags a result record keeps (its `count` is always complete)."""

TEXT_LIMIT = 160
"""Longest excerpt of a flagged line kept in a flag."""

DEDUP_LIMIT = 100_000
"""Distinct flags remembered to drop repeats; beyond it flags are only counted."""

PATH_LIMIT = 300
"""Longest file path kept in a flag (a hostile header can name anything)."""

PARSE_LIMIT = 2_000_000
"""Largest piece of Python (in characters) parsed as a tree; a larger one is read by the text scan."""

LINE_LIMIT = 20_000
"""Longest line parsed on its own; a longer one is read by the text scan."""

GIT_METADATA_FILES = frozenset({".gitattributes", ".gitmodules"})
"""Files that change how git treats the tree (filters, diff drivers, submodules) rather than what the code does."""

_HUNK = re.compile(r"^@@ -(\d{1,12})(?:,(\d{1,12}))? \+(\d{1,12})(?:,(\d{1,12}))? @@")
_CONTEXT_NEW_RANGE = re.compile(r"^--- (\d{1,12})(?:,(\d{1,12}))? ----\s*$")
_CONTEXT_OLD_RANGE = re.compile(r"^\*\*\* (\d{1,12})(?:,(\d{1,12}))? \*\*\*\*\s*$")
_TEST_FILE = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*\.py$|_tests?\.py$|(?:^|/)conftest\.py$")
_IMPORT_LINE = re.compile(r"^\s{0,200}(?:import|from)\s")
_BLOCK_CONTINUATIONS = re.compile(r"^(?:elif|else|except|finally|case)\b")


@dataclass(frozen=True)
class AddedLine:
    """One line a diff adds: the file it goes to, its number in the new file (None when unknown), its text."""

    file: str
    line: int | None
    text: str


@dataclass
class Hunk:
    """The new side of one hunk: (line number in the new file, text, whether the patch adds it) per line."""

    file: str
    lines: list[tuple[int, str, bool]] = field(default_factory=list)
    creates_file: bool = False  # `@@ -0,0 +1,N @@`: the whole new file


def review_prediction(prediction: Any) -> dict[str, Any]:
    """`integrity.review` of a result record: the flags of every patch the prediction carries, first REVIEW_CAP.

    Never raises: a prediction whose fields are not what they should be is scanned for what can be read.
    """
    return review_patches(prediction_patches(prediction))


def prediction_patches(prediction: Any) -> list[tuple[str, str]]:
    """(label, patch text) of the final patch, each checkpoint state and each agent patch, in that order."""
    found: list[tuple[str, str]] = []
    model_patch = getattr(prediction, "model_patch", None)
    if isinstance(model_patch, str) and model_patch:
        found.append(("model_patch", model_patch))
    checkpoints = getattr(prediction, "checkpoints", None) or ()
    for number, checkpoint in enumerate(checkpoints if isinstance(checkpoints, (list, tuple)) else (), start=1):
        patch = getattr(checkpoint, "patch", None)  # a `run.predictions.Checkpoint`, read by its fields
        if isinstance(patch, str) and patch:
            kind, agent = getattr(checkpoint, "checkpoint_type", None), getattr(checkpoint, "agent_id", None)
            found.append((f"checkpoint {number} ({kind}{f', {agent}' if agent else ''})", patch))
    agents = getattr(prediction, "agent_patches", None)
    for agent, patch in (agents.items() if isinstance(agents, dict) else ()):
        if isinstance(patch, str) and patch:
            found.append((f"agent_patches[{agent}]", patch))
    return [(_printable(label), text) for label, text in found]


def review_patches(patches: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """{"count": every distinct flag, "high": how many of them are high, "flags": the first REVIEW_CAP, high ones
    first}; a flag met again in a later patch (cumulative checkpoints repeat their lines) is kept once, under the
    first patch that had it. Past DEDUP_LIMIT distinct flags, later ones are counted without that check, so memory
    stays bounded whatever the patch size."""
    seen: set[tuple[str, int | None, str, str]] = set()
    high: list[dict[str, Any]] = []
    low: list[dict[str, Any]] = []
    count = high_count = 0
    for label, text in patches:
        for flag in _flags_of(text):
            key = (flag["file"], flag["line"], flag["marker"], flag["text"])
            if key in seen:
                continue
            if len(seen) < DEDUP_LIMIT:
                seen.add(key)
            count += 1
            is_high = flag["severity"] == "high"
            high_count += is_high
            kept = high if is_high else low
            if len(kept) < REVIEW_CAP:
                kept.append({**flag, "patch": label})
    return {"count": count, "high": high_count, "flags": (high + low)[:REVIEW_CAP]}


def patch_flags(patch: Any) -> list[dict[str, Any]]:
    """The flags of one patch text: {"file", "line" (new file, or None for a whole-file flag), "marker", "text",
    "severity"}, file by file in the patch's order and by line within a file.

    Never raises; anything that is not text gives no flag, and an unexpected failure while analysing (a bug, not an
    input) gives one `review_incomplete` flag after those found so far, so a reader knows the analysis stopped.
    """
    return list(_flags_of(patch))


def _flags_of(patch: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(patch, str):
        return
    try:
        for path in _metadata_files(patch):
            yield _flag(path, None, "git_metadata_file", "")
        by_file: dict[str, list[Hunk]] = {}
        for hunk in hunks(patch):
            by_file.setdefault(hunk.file, []).append(hunk)
        for file, file_hunks in by_file.items():
            yield from _file_flags(file, file_hunks)
    except Exception as exc:  # noqa: BLE001 - the review is a hint; it must never sink the scoring of a prediction
        yield _flag("", None, "review_incomplete", _printable(type(exc).__name__))


def _flag(file: str, line: int | None, marker: str, text: str) -> dict[str, Any]:
    flag = {"file": file[:PATH_LIMIT], "line": line, "marker": marker, "text": text}
    return {**flag, "severity": severity_of(flag)}


def _file_flags(file: str, file_hunks: list[Hunk]) -> Iterator[dict[str, Any]]:
    """One file's flags, by line."""
    in_test_file = bool(_TEST_FILE.search(file))
    texts = {number: text for hunk in file_hunks for number, text, added in hunk.lines if added}
    found: set[tuple[int, str]] = set()
    lower = file.lower()
    if lower.endswith(PYTHON_SUFFIXES):
        found = _python_findings(file_hunks, in_test_file)
    elif lower.endswith(NATIVE_SUFFIXES):
        for hunk in file_hunks:
            scanner = NativeScanner()
            for number, text, added in hunk.lines:
                markers = scanner.markers(text)  # context lines too: a comment may open before the added ones
                if added:
                    found |= {(number, marker) for marker, _ in markers}
    else:
        for number, text in texts.items():
            found |= {(number, marker) for marker, _ in text_markers(text, in_test_file)
                      if marker not in ("dynamic_code", "ctypes", "pytest_in_code", "skip_from_code")}
    for number, marker in sorted(found, key=lambda f: (f[0], list(MARKERS).index(f[1]) if f[1] in MARKERS else 99)):
        text = texts.get(number, "")
        yield _flag(file, number, marker, _excerpt(text, _hit_position(text, marker, in_test_file)))


def _hit_position(text: str, marker: str, in_test_file: bool) -> int:
    """Where in a long line the excerpt should start: the text scan's hit of the same marker, else the start."""
    if len(text) <= TEXT_LIMIT:
        return 0
    return next((at for found, at in text_markers(text, in_test_file) if found == marker), 0)


def _python_findings(file_hunks: list[Hunk], in_test_file: bool) -> set[tuple[int, str]]:
    """(new line, marker) of every finding on an added line of a Python file's hunks."""
    aliases: dict[str, str] = {}
    for hunk in file_hunks:
        for _, text, _ in hunk.lines:
            if _IMPORT_LINE.match(text) and len(text) <= LINE_LIMIT:
                aliases.update(import_aliases(text.strip()))
    found: set[tuple[int, str]] = set()
    unparsed: list[int] = []
    for hunk in file_hunks:
        if hunk.creates_file:
            whole = _parsed_findings(hunk.lines, in_test_file, aliases)
            if whole is None:
                first_added = next((n for n, _, added in hunk.lines if added), 1)
                found.add((first_added, "syntax_error"))
                found |= _text_findings(hunk.lines, in_test_file)
            else:
                found |= whole
            continue
        whole = _parsed_findings(hunk.lines, in_test_file, aliases)
        if whole is not None:
            found |= whole
            continue
        for run in _added_runs(hunk.lines):
            piece = _parsed_findings(run, in_test_file, aliases)
            if piece is not None:
                found |= piece
                continue
            for entry in run:
                single = _parsed_findings([entry], in_test_file, aliases)
                if single is None:
                    found |= _text_findings([entry], in_test_file)
                    if entry[1].strip() and not entry[1].strip().startswith("#"):
                        unparsed.append(entry[0])
                else:
                    found |= single
            found |= {(run[0][0], m) for m in string_pieces_markers([t for _, t, _ in run], in_test_file)}
    if unparsed:
        found.add((min(unparsed), "unparsed_code"))
    return found


def _added_runs(lines: list[tuple[int, str, bool]]) -> Iterator[list[tuple[int, str, bool]]]:
    """The maximal runs of consecutive added lines."""
    run: list[tuple[int, str, bool]] = []
    for entry in lines:
        if entry[2]:
            run.append(entry)
        elif run:
            yield run
            run = []
    if run:
        yield run


def _parsed_findings(lines: list[tuple[int, str, bool]], in_test_file: bool,
                     aliases: dict[str, str]) -> set[tuple[int, str]] | None:
    """(new line, marker) of the findings on added lines when the lines parse as code (dedented; a block opener
    given a body; a lone `else:`/`except X:` given its `if`/`try`); None when they do not."""
    if not any(added for _, _, added in lines):
        return set()
    text = textwrap.dedent("\n".join(t for _, t, _ in lines))
    if len(text) > (PARSE_LIMIT if len(lines) > 1 else LINE_LIMIT):
        return None
    numbers = [n for n, _, _ in lines]
    offset = 0
    stripped = text.lstrip()
    if len(lines) == 1 and _BLOCK_CONTINUATIONS.match(stripped):
        prefix = "try:\n pass\n" if stripped.startswith(("except", "finally")) else \
            "match x:\n" if stripped.startswith("case") else "if x:\n pass\n"
        text, offset = prefix + stripped, prefix.count("\n")
    findings = analyse(text, in_test_file, aliases)
    if findings is None:  # a block opener (a comment may follow its colon) given a body
        last = text.rsplit("\n", 1)[-1]
        findings = analyse(text + "\n" + " " * (len(last) - len(last.lstrip()) + 4) + "pass", in_test_file, aliases)
    if findings is None:
        return None
    added = {n for n, _, a in lines if a}
    found: set[tuple[int, str]] = set()
    for finding in findings:
        span = [numbers[i - 1 - offset] for i in range(finding.first, finding.last + 1)
                if 0 <= i - 1 - offset < len(numbers)]
        first_added = next((n for n in span if n in added), None)
        if first_added is not None:
            found.add((first_added, finding.marker))
    return found


def _text_findings(lines: list[tuple[int, str, bool]], in_test_file: bool) -> set[tuple[int, str]]:
    return {(number, marker) for number, text, added in lines if added
            for marker, _ in text_markers(text, in_test_file)}


def line_markers(text: str, in_test_file: bool = False) -> list[tuple[str, str]]:
    """(marker, the line's excerpt) for each marker of one line of Python: parsed when it parses on its own, else
    read as text; in the markers' table order."""
    parsed = _parsed_findings([(1, text, True)], in_test_file, {})
    markers = {m for _, m in parsed} if parsed is not None else {m for m, _ in text_markers(text, in_test_file)}
    order = list(MARKERS)
    return [(m, _excerpt(text, _hit_position(text, m, in_test_file)))
            for m in sorted(markers, key=lambda m: order.index(m) if m in order else 99)]


def hunks(patch: str) -> Iterator[Hunk]:
    """The new side of every hunk of a unified or context diff, with its file and line numbers.

    Hunk bodies are read by their header's line counts, as git does, so an added line that itself starts with
    `++ ` is not mistaken for a file header. Lines outside hunks (mail text, binary data) are skipped. The file is
    the last header name before the hunk that is not /dev/null: `+++` in unified diffs, `---` in context diffs.
    """
    lines = patch.split("\n")
    index, current = 0, ""
    while index < len(lines):
        line = lines[index].removesuffix("\r")
        index += 1
        if line.startswith("diff --git "):
            current = _git_header_new_name(line[len("diff --git "):]) or current
        elif line[:4] in ("+++ ", "--- ", "*** ") and not _is_context_range(line):
            name = _header_name(line[4:])
            current = name if name and name != "/dev/null" else current
        elif match := _HUNK.match(line):
            old_count = 1 if match.group(2) is None else int(match.group(2))
            new_count = 1 if match.group(4) is None else int(match.group(4))
            hunk = Hunk(current, creates_file=old_count == 0 and int(match.group(3)) <= 1)
            index = _unified_hunk(lines, index, hunk, int(match.group(3)), old_count, new_count)
            yield hunk
        elif match := _CONTEXT_NEW_RANGE.match(line):
            first = int(match.group(1))
            last = first if match.group(2) is None else int(match.group(2))
            hunk = Hunk(current)
            index = _context_new_section(lines, index, hunk, first, last)
            yield hunk


def added_lines(patch: str) -> Iterator[AddedLine]:
    """Every line a unified or context diff adds, with its file and new line number (see `hunks`)."""
    for hunk in hunks(patch):
        for number, text, added in hunk.lines:
            if added:
                yield AddedLine(hunk.file, number, text)


def _is_context_range(line: str) -> bool:
    """`*** 1,3 ****` and `--- 1,4 ----`: a context hunk's line ranges, not file headers."""
    return bool(_CONTEXT_OLD_RANGE.match(line) or _CONTEXT_NEW_RANGE.match(line))


def _unified_hunk(lines: list[str], index: int, hunk: Hunk, number: int, old_left: int, new_left: int) -> int:
    """Read a unified hunk's new side into `hunk`; return the index after its body."""
    while index < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[index].removesuffix("\r")
        tag = line[:1]
        if tag == "+" and new_left > 0:
            hunk.lines.append((number, line[1:], True))
            number, new_left = number + 1, new_left - 1
        elif tag == "-" and old_left > 0:
            old_left -= 1
        elif tag in (" ", "") and old_left > 0 and new_left > 0:  # git writes an empty context line as " "
            hunk.lines.append((number, line[1:], False))
            number, old_left, new_left = number + 1, old_left - 1, new_left - 1
        elif tag != "\\":  # "\ No newline at end of file" belongs to the hunk; anything else ends it
            break
        index += 1
    return index


def _context_new_section(lines: list[str], index: int, hunk: Hunk, first: int, last: int) -> int:
    """Read a context diff's new-file section (`+ ` and `! ` added, `  ` context) into `hunk`; return the index
    after it."""
    number = first
    while index < len(lines) and number <= last:
        line = lines[index].removesuffix("\r")
        if line[:2] in ("+ ", "! "):
            hunk.lines.append((number, line[2:], True))
        elif line[:2] == "  ":
            hunk.lines.append((number, line[2:], False))
        else:
            break
        number += 1
        index += 1
    return index


def _metadata_files(patch: str) -> list[str]:
    """Every path a diff names (git, unified and context headers, renames and copies) whose last component is
    `.gitattributes` or `.gitmodules`, in order, once each."""
    found: dict[str, None] = {}
    for raw in patch.split("\n"):
        line = raw.removesuffix("\r")
        names: list[str] = []
        if line.startswith("diff --git "):
            names = _git_header_names(line[len("diff --git "):])
        elif line[:4] in ("+++ ", "--- ", "*** ") and not _is_context_range(line):
            names = [_header_name(line[4:])]
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            names = [_unquote(line.split(" ", 2)[2])]
        for name in names:
            if name and name.rstrip("/").rsplit("/", 1)[-1] in GIT_METADATA_FILES:
                found.setdefault(_printable(name))
    return list(found)


def _header_name(text: str) -> str:
    """The path of a `---`/`+++`/`***` header: unquoted, timestamp dropped, `a/`/`b/` prefix dropped."""
    text = text.strip()
    name = _unquote(text) if text.startswith('"') else text.split("\t")[0].strip()
    return name if name == "/dev/null" else _printable(_strip_prefix(name))


def _git_header_names(rest: str) -> list[str]:
    """Both names of `diff --git A B` (either may be quoted), prefixes dropped; best effort on odd input."""
    rest = rest.strip()
    if rest.startswith('"'):
        first, used = _c_unquote(rest)
        return [_strip_prefix(first), _strip_prefix(_unquote(rest[used:].strip()))]
    for marker in (' "b/', " b/"):
        at = rest.find(marker)
        if at > 0:
            return [_strip_prefix(rest[:at]), _strip_prefix(_unquote(rest[at + 1:].strip()))]
    return [_strip_prefix(rest)]


def _git_header_new_name(rest: str) -> str:
    names = _git_header_names(rest)
    return _printable(names[-1]) if names else ""


def _unquote(text: str) -> str:
    return _c_unquote(text)[0] if text.startswith('"') else text


def _c_unquote(text: str) -> tuple[str, int]:
    """Git's C-quoted name at text[0] == '"' (decoded as the harness decodes it), made printable: bytes that are
    not UTF-8 become U+FFFD. Returns it and how many characters it used."""
    name, used = c_unquote(text)
    return name.encode("utf-8", "surrogatepass").decode("utf-8", "replace"), used


def _strip_prefix(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _excerpt(text: str, start: int) -> str:
    """At most TEXT_LIMIT characters of a line, trimmed, around position `start` (so the hit is always shown)."""
    stripped = text.strip()
    start = max(0, start - (len(text) - len(text.lstrip())))
    if len(stripped) <= TEXT_LIMIT:
        return _printable(stripped)
    begin = max(0, min(start - 40, len(stripped) - TEXT_LIMIT + 2))
    piece = stripped[begin:begin + TEXT_LIMIT - 2]
    return _printable(("…" if begin else "") + piece + ("…" if begin + len(piece) < len(stripped) else ""))


def _printable(text: str) -> str:
    """Text safe to write anywhere: lone surrogates (undecodable bytes) and control characters become U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF or (ord(c) < 32 and c != "\t") or ord(c) == 127 else c
                   for c in text)
