"""Review flags: lines a prediction's patches add that touch the test runner's machinery (shown, never scored).

Code under test runs in pytest's own process, so a patch can still reach into pytest from inside it (a known limit:
docs/integrity.md). The harness cannot tell such code from honest code by running it, but a reader can by reading
it; this module points the reader at the lines worth reading. It scans the ADDED lines of every patch a prediction
carries (final patch, checkpoint states, agent patches) for markers such as imports of `_pytest`, writes to
`sys.modules` or `builtins`, exit hooks, `os._exit`, `ctypes`, `exec`/`compile`, trace hooks, `__code__`
assignment and skips raised from code under test, and names any `.gitattributes` or `.gitmodules` in a diff.

Everything here is pure text work over hostile input: it never raises (whatever the text), runs in time linear
in the patch size (every pattern's gaps are bounded), and returns only printable, valid text. Flags are hints
for people: a marker can be innocent, and a determined author can evade a line-based scan (a statement split
over lines, names built at run time); that is why they never change a score.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from asyncodebench.scoring.patches import c_unquote

REVIEW_CAP = 100
"""How many flags a result record keeps (its `count` is always complete)."""

TEXT_LIMIT = 160
"""Longest excerpt of a flagged line kept in a flag."""

DEDUP_LIMIT = 100_000
"""Distinct flags remembered to drop repeats; beyond it flags are only counted."""

PATH_LIMIT = 300
"""Longest file path kept in a flag (a hostile header can name anything)."""

GIT_METADATA_FILES = frozenset({".gitattributes", ".gitmodules"})
"""Files that change how git treats the tree (filters, diff drivers, submodules) rather than what the code does."""

_IMPORTED_MODULES = {  # first component of an imported module -> marker
    "_pytest": "import_pytest_internals", "pluggy": "import_pluggy", "pytest_jsonreport": "import_pytest_jsonreport",
    "gc": "import_gc", "atexit": "atexit", "ctypes": "ctypes",
}
# Markers read from the line with a pattern; every repetition is bounded so no line can make a search quadratic.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((marker, re.compile(pattern)) for marker, pattern in (
    ("sys_modules_write", r"sys\.modules\s{0,20}(?:\[[^\]\n]{0,200}\]\s{0,20}=(?!=)|\.(?:update|setdefault|pop|"
                          r"popitem|clear|__setitem__|__delitem__)\s{0,20}\()|\bdel\s{1,20}[\w.]{0,60}sys\.modules\b"),
    ("builtins_write", r"\b_{0,2}builtins_{0,2}(?:\.__dict__)?(?:\.\w{1,80}|\[[^\]\n]{0,200}\])\s{0,20}=(?!=)|"
                       r"\bsetattr\s{0,20}\(\s{0,20}_{0,2}builtins_{0,2}\b|\bvars\s{0,20}\(\s{0,20}_{0,2}builtins_{0,2}"
                       r"\s{0,20}\)\s{0,20}\[|\b_{0,2}builtins_{0,2}\.__dict__\.(?:update|setdefault|__setitem__)\b"),
    ("gc_introspection", r"\bgc\.get_(?:referrers|referents|objects)\b"),
    ("atexit", r"atexit"),
    ("os_exit", r"(?<!\bself)\._exit\s{0,20}\(|\bimport\s[\w\s,.]{0,200}\b_exit\b"),
    ("ctypes", r"\bctypes\b"),
    ("dynamic_code", r"(?<!def )(?<![\w.])(?:exec|compile|eval)\s{0,20}\("),
    ("trace_hook", r"\bset(?:trace|profile)(?:_all_threads)?\b"),
    ("code_swap", r"\.__code__\s{0,20}=(?!=)|\bsetattr\s{0,20}\([^)\n]{0,200}['\"]__code__['\"]"),
    ("pytest_env", r"\bPYTEST_(?:CURRENT_TEST|ADDOPTS|PLUGINS|DISABLE_PLUGIN_AUTOLOAD)\b"),
))
# In code under test (not in test files), these are how failures become skips: what decision 12 scores, shown too.
_CODE_ONLY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("skip_from_code", re.compile(r"\bSkipTest\b|\bpytest\.(?:skip|xfail|importorskip|exit|fail)\b|"
                                  r"\b(?:Skipped|XFailed)\s{0,20}\(|\b(?:skip|xfail)\.Exception\b")),
)
_DYNAMIC_IMPORT = re.compile(r"(?:__import__|import_module)\s{0,20}\(\s{0,20}[rRbBuU]{0,2}['\"]([\w.]{1,200})")
_STATEMENT = re.compile(r"[^;:]+")
_HUNK = re.compile(r"^@@ -(\d{1,12})(?:,(\d{1,12}))? \+(\d{1,12})(?:,(\d{1,12}))? @@")
_CONTEXT_NEW_RANGE = re.compile(r"^--- (\d{1,12})(?:,(\d{1,12}))? ----\s*$")
_CONTEXT_OLD_RANGE = re.compile(r"^\*\*\* (\d{1,12})(?:,(\d{1,12}))? \*\*\*\*\s*$")
_TEST_FILE = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*\.py$|_tests?\.py$|(?:^|/)conftest\.py$")


@dataclass(frozen=True)
class AddedLine:
    """One line a diff adds: the file it goes to, its number in the new file (None when unknown), its text."""

    file: str
    line: int | None
    text: str


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
    """{"count": every distinct flag, "flags": the first REVIEW_CAP}; a flag met again in a later patch (cumulative
    checkpoints repeat their lines) is kept once, under the first patch that had it. Past DEDUP_LIMIT distinct
    flags, later ones are counted without that check, so memory stays bounded whatever the patch size."""
    seen: set[tuple[str, int | None, str, str]] = set()
    flags: list[dict[str, Any]] = []
    count = 0
    for label, text in patches:
        for flag in _flags_of(text):
            key = (flag["file"], flag["line"], flag["marker"], flag["text"])
            if key in seen:
                continue
            if len(seen) < DEDUP_LIMIT:
                seen.add(key)
            count += 1
            if len(flags) < REVIEW_CAP:
                flags.append({**flag, "patch": label})
    return {"count": count, "flags": flags}


def patch_flags(patch: Any) -> list[dict[str, Any]]:
    """The flags of one patch text: {"file", "line" (new file, or None for a whole-file flag), "marker", "text"}.

    Never raises; anything that is not text gives no flag, and an unexpected failure while scanning (a bug, not an
    input) gives one `review_incomplete` flag after those found so far, so a reader knows the scan stopped.
    """
    return list(_flags_of(patch))


def _flags_of(patch: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(patch, str):
        return
    test_files: dict[str, bool] = {}
    try:
        for path in _metadata_files(patch):
            yield {"file": path[:PATH_LIMIT], "line": None, "marker": "git_metadata_file", "text": ""}
        for added in added_lines(patch):
            if added.file not in test_files:
                test_files[added.file] = bool(_TEST_FILE.search(added.file))
            for marker, excerpt in line_markers(added.text, test_files[added.file]):
                yield {"file": added.file[:PATH_LIMIT], "line": added.line, "marker": marker, "text": excerpt}
    except Exception as exc:  # noqa: BLE001 - the scan is a hint; it must never sink the scoring of a prediction
        yield {"file": "", "line": None, "marker": "review_incomplete", "text": _printable(type(exc).__name__)}


def line_markers(text: str, in_test_file: bool = False) -> list[tuple[str, str]]:
    """(marker, excerpt around the first hit) for each marker found in one added line, in a fixed order."""
    found: dict[str, int] = {}
    for start, module in _imports(text):
        marker = _IMPORTED_MODULES.get(module.split(".")[0])
        if marker is not None:
            found.setdefault(marker, start)
        elif module.split(".")[0] == "pytest" and not in_test_file:
            found.setdefault("pytest_in_code", start)
    patterns = _PATTERNS if in_test_file else _PATTERNS + _CODE_ONLY_PATTERNS
    for marker, pattern in patterns:
        match = pattern.search(text)
        if match is not None:
            found.setdefault(marker, match.start())
    return [(marker, _excerpt(text, start)) for marker, start in found.items()]


def _imports(text: str) -> Iterator[tuple[int, str]]:
    """(position, module) of what a line imports: `import a, b.c as d` and `from a.b import c` in each statement
    of a line (split at `;` and `:`, so `if x: import gc` counts), and `__import__("a")` / `import_module("a")`
    with a literal name."""
    for statement in _STATEMENT.finditer(text):
        words = statement.group().split(None, 2)
        if len(words) >= 2 and words[0] == "import":
            for part in statement.group().strip()[len("import"):].split(","):
                name = part.strip().split(" ")[0].strip("()")
                if name:
                    yield statement.start(), name
        elif len(words) >= 3 and words[0] == "from" and words[1][:1] != "." and words[2].startswith("import"):
            yield statement.start(), words[1]
    for match in _DYNAMIC_IMPORT.finditer(text):
        yield match.start(), match.group(1)


def added_lines(patch: str) -> Iterator[AddedLine]:
    """Every line a unified or context diff adds, with its file and new line number.

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
            index = yield from _unified_hunk(lines, index, current, int(match.group(3)), old_count, new_count)
        elif match := _CONTEXT_NEW_RANGE.match(line):
            first = int(match.group(1))
            last = first if match.group(2) is None else int(match.group(2))
            index = yield from _context_new_section(lines, index, current, first, last)


def _is_context_range(line: str) -> bool:
    """`*** 1,3 ****` and `--- 1,4 ----`: a context hunk's line ranges, not file headers."""
    return bool(_CONTEXT_OLD_RANGE.match(line) or _CONTEXT_NEW_RANGE.match(line))


def _unified_hunk(lines: list[str], index: int, file: str, number: int, old_left: int,
                  new_left: int) -> Generator[AddedLine, None, int]:
    """Yield a unified hunk's added lines; return the index after its body."""
    while index < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[index].removesuffix("\r")
        tag = line[:1]
        if tag == "+" and new_left > 0:
            yield AddedLine(file, number, line[1:])
            number, new_left = number + 1, new_left - 1
        elif tag == "-" and old_left > 0:
            old_left -= 1
        elif tag in (" ", "") and old_left > 0 and new_left > 0:  # git writes an empty context line as " "
            number, old_left, new_left = number + 1, old_left - 1, new_left - 1
        elif tag != "\\":  # "\ No newline at end of file" belongs to the hunk; anything else ends it
            break
        index += 1
    return index


def _context_new_section(lines: list[str], index: int, file: str, first: int,
                         last: int) -> Generator[AddedLine, None, int]:
    """Yield the added (`+ `) and changed (`! `) lines of a context diff's new-file section; return the index after."""
    number = first
    while index < len(lines) and number <= last:
        line = lines[index].removesuffix("\r")
        if line[:2] in ("+ ", "! "):
            yield AddedLine(file, number, line[2:])
        elif line[:2] != "  ":
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
