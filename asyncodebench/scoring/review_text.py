"""Review of lines read as text: C/C++ sources, files that are neither Python nor C, and Python lines that do not
parse on their own (a hunk's piece of a longer statement). Markers as in `review_markers.MARKERS`.

Every pattern's repetitions are bounded, so no line makes a search quadratic; everything here is pure text work.
"""

from __future__ import annotations

import re

from asyncodebench.scoring.review_python import string_markers

NATIVE_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".inl", ".ipp", ".cu",
                   ".cuh", ".m", ".mm", ".pyx", ".pxd", ".pxi")
PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")

# Python words and shapes worth a reader's look when the line cannot be parsed.
_TEXT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((marker, re.compile(pattern)) for marker, pattern in (
    ("frame_access", r"\b(?:_getframe|_current_frames|f_back|f_locals|f_globals|f_builtins|gi_frame|cr_frame|"
                     r"currentframe|getouterframes|getinnerframes)\b"),
    ("caller_source", r"\b(?:linecache|extract_stack|walk_stack|getframeinfo|format_stack|print_stack)\b|"
                      r"\binspect\s{0,20}\.\s{0,20}(?:stack|trace|getsource\w{0,10}|findsource)\b"),
    ("import_hook", r"\b(?:meta_path|path_hooks|path_importer_cache|MetaPathFinder|PathEntryFinder)\b"),
    ("code_object", r"\b(?:__code__|co_code|co_consts|CodeType|marshal)\b"),
    ("import_pytest_internals", r"\b_pytest\b"),
    ("import_pluggy", r"\bpluggy\b"),
    ("import_pytest_jsonreport", r"\bpytest_jsonreport\b"),
    ("pytest_env", r"\bPYTEST_[A-Z_]{3,}"),
    ("fd_or_stream", r"\bdup2?\s{0,20}\(|\bcloserange\b|\bsys\s{0,20}\.\s{0,20}(?:__)?std(?:out|err|in)(?:__)?"
                     r"\s{0,20}=(?!=)"),
    ("gc_introspection", r"\bget_(?:objects|referrers|referents)\b"),
    ("atexit", r"\batexit\b"),
    ("os_exit", r"\bos\s{0,20}\.\s{0,20}_exit\b|\bfrom\s{1,20}os\s{1,20}import\b[^\n]{0,200}\b_exit\b"),
    ("trace_hook", r"\b(?:settrace|setprofile|addaudithook)\b"),
    ("ctypes_interpreter", r"\b(?:pythonapi|PyDLL|py_object)\b"),
    ("ctypes", r"\bctypes\b"),
    ("dynamic_code", r"(?<![\w.])(?:exec|eval|compile)\s{0,20}\("),
    ("process_memory", r"/proc/self"),
    ("reads_git", r"[/\\]\.git\b|\.git[/\\]"),
))
_CODE_ONLY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pytest_in_code", re.compile(r"^\s{0,200}(?:import|from)\s{1,20}pytest\b")),
    ("skip_from_code", re.compile(r"\bSkipTest\b|\bpytest\s{0,20}\.\s{0,20}(?:skip|xfail|importorskip|exit|fail)\b")),
)
# In C/C++ (comments removed): the Python C API and run-time symbol lookup.
_NATIVE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((marker, re.compile(pattern)) for marker, pattern in (
    ("python_c_api", r"\bPython\.h\b|\b_?Py[A-Z][A-Za-z0-9]{0,40}_\w|\b_?Py_\w|\bPy(?:Object|TypeObject)\b|"
                     r"\blibpython"),
    ("dlsym", r"\bdl(?:v)?sym\b|\bGetProcAddress\b"),
    ("process_memory", r"/proc/self"),
    ("dlopen", r"\bdlopen\b|\bLoadLibrary\w{0,10}\b"),
    ("native_constructor", r"__attribute__\s{0,20}\(\s{0,20}\(\s{0,20}constructor|\.init_array\b|"
                           r"#\s{0,20}pragma\s{1,20}init\b"),
    ("pytest_by_name", r"\b_pytest\b|\bpluggy\b|\bpytest_jsonreport\b"),
))
_STRING_LITERAL = re.compile(r"'((?:[^'\\\n]|\\.){0,2000})'|\"((?:[^\"\\\n]|\\.){0,2000})\"")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")


def text_markers(line: str, in_test_file: bool = False) -> list[tuple[str, int]]:
    """(marker, position of its hit) for each Python marker a line shows as text, in a fixed order."""
    patterns = _TEXT_PATTERNS if in_test_file else _TEXT_PATTERNS + _CODE_ONLY_PATTERNS
    found: dict[str, int] = {}
    for marker, pattern in patterns:
        match = pattern.search(line)
        if match is not None:
            found.setdefault(marker, match.start())
    if "ctypes_interpreter" in found:
        found.pop("ctypes", None)
    return list(found.items())


def string_pieces_markers(lines: list[str], in_test_file: bool) -> set[str]:
    """Markers of the string literals of some lines joined in order: a name split over literals
    (`"_get" +` on one line, `"frame"` on the next) is read whole."""
    pieces = [m.group(1) if m.group(1) is not None else m.group(2) or ""
              for line in lines for m in _STRING_LITERAL.finditer(line)]
    joined = "".join(pieces)
    found = {marker for marker, _ in text_markers(joined, in_test_file)} - {"dynamic_code", "ctypes"}
    for size in (1, 2, 3, 4):  # a short run of neighbouring pieces read as one name
        for start in range(max(0, len(pieces) - size + 1)):
            found |= string_markers("".join(pieces[start:start + size]), in_test_file, as_path=False)
    return found


class NativeScanner:
    """The C/C++ lines of one hunk in order: comments removed (a block comment may span lines), then the C API
    patterns."""

    def __init__(self) -> None:
        self.in_comment = False

    def markers(self, line: str) -> list[tuple[str, int]]:
        """(marker, position) for each C API pattern of the next line of the hunk."""
        code = self._without_comments(line)
        found: dict[str, int] = {}
        for marker, pattern in _NATIVE_PATTERNS:
            match = pattern.search(code)
            if match is not None:
                found.setdefault(marker, match.start())
        return list(found.items())

    def _without_comments(self, line: str) -> str:
        text = line
        if self.in_comment:
            end = text.find("*/")
            if end < 0:
                return ""
            text, self.in_comment = text[end + 2:], False
        text = _BLOCK_COMMENT.sub(" ", text)
        start = text.find("/*")
        if start >= 0:
            text, self.in_comment = text[:start], True
        slashes = text.find("//")
        return text[:slashes] if slashes >= 0 and not _in_string(text, slashes) else text


def _in_string(text: str, position: int) -> bool:
    """Whether `position` falls inside a double-quoted C string (so `"http://x"` keeps its `//`)."""
    return text[:position].count('"') % 2 == 1
