"""Untrusted text written for a reader, one function per output format.

Model names, run ids of predictions, file names from patches, trajectory file names, the evaluated code's output and
every message that echoes them come from whoever made the predictions. Each writer passes such text through the
function of its format, so that it shows as written and can never act as that format's markup:

- `terminal_text` (and `plain_text` for text files): no control character and no escape sequence (CSI, OSC such as a
  window title or an OSC 52 clipboard write, DCS, C1 controls), no Unicode bidirectional override; line breaks kept
  only where the caller allows them.
- `markdown_cell` and `markdown_text`: one line, no raw HTML, no `|` that ends a table cell, no link or code span.
- `csv_cell`: one line; a cell that a spreadsheet would read as a formula is kept as text.
- `page_link`: a relative link to a file inside the run folder, or no link.
- `html_text`: the control characters out (Jinja's autoescape does the escaping of every page value).

Removed characters are shown as U+FFFD (a line break, where none is allowed, as U+23CE), so a reader sees that
something was there. Lowest layer: imports nothing of the package.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

REPLACEMENT, LINE_BREAK = "\ufffd", "\u23ce"

# Escape sequences, removed whole: CSI (7- and 8-bit), the string commands OSC, DCS, SOS, PM and APC up to their
# terminator (BEL or ST) or the next control character, and the other two- and three-character ESC sequences.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
# Line breaks as str.splitlines() and most editors see them.
_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# What remains unsafe: C0 (tab aside), DEL, C1, and the bidirectional controls that reorder what a reader sees.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Characters that Markdown reads as markup anywhere in a line: escaped with a backslash (CommonMark allows it for
# all ASCII punctuation), so no HTML tag, entity, autolink, link, image, code span or table cell can form.
_MARKDOWN = re.compile(r"([\\`|<>&\[\]])")
# What starts a block (heading, quote, list, rule, setext underline, fence) when it begins a line.
_BLOCK_START = re.compile(r"^(\s*\d*)([#>+*=~.)-])")
_FORMULA_START = tuple("=+-@\t\r\uff1d\uff0b\uff0d\uff20")  # the last four: full-width = + - @
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _clean(text: Any, newlines: bool) -> str:
    text = _SEQUENCE.sub("", str(text))
    text = _BREAK.sub("\n" if newlines else LINE_BREAK, text)
    return _CONTROL.sub(lambda m: m.group() if newlines and m.group() == "\n" else REPLACEMENT, text)


def terminal_text(text: Any, *, newlines: bool = False) -> str:
    """`text` safe to print on a terminal: no escape sequence, control character or bidi override; line breaks
    kept (as a newline) only with `newlines`, else shown as U+23CE, so one message stays one line."""
    return _clean(text, newlines)


def plain_text(text: Any) -> str:
    """`text` for a plain text file or a `<pre>` block: as `terminal_text`, with its lines and tabs kept."""
    return _clean(text, newlines=True)


def html_text(value: Any) -> Any:
    """A page value with its control characters out (tabs and newlines kept); markup made by the kit itself
    (`markupsafe.Markup`) and values that are not text pass unchanged. Escaping is Jinja's autoescape."""
    if not isinstance(value, str) or hasattr(value, "__html__"):
        return value
    return _clean(value, newlines=True)


def markdown_cell(text: Any) -> str:
    """`text` as one Markdown table cell: one line, and each backslash, backtick, `|`, `<`, `>`, `&`, `[` and `]`
    escaped with a backslash, so it can neither end its cell nor make a row, a tag, a link or a code span."""
    return _MARKDOWN.sub(r"\\\1", _clean(text, newlines=False))


def markdown_text(text: Any) -> str:
    """`text` as Markdown inline text (a list item, a bold line): as `markdown_cell`, and a leading block marker
    (`#`, `>`, `-`, `1.`...) escaped too, so text placed at a line's start cannot open a heading or a list."""
    return _BLOCK_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", markdown_cell(text), count=1)


def csv_cell(value: Any) -> Any:
    """A CSV cell: text becomes one line, and text that a spreadsheet would run as a formula (starting with
    `= + - @`, a tab or a carriage return, after any spaces) gets a leading `'`; numbers, booleans and None pass
    unchanged."""
    if not isinstance(value, str):
        return value
    text = _clean(value, newlines=False)
    return f"'{text}" if value.lstrip(" ").startswith(_FORMULA_START) else text


def page_link(path: str, base: str = "", climb: bool = False) -> str | None:
    """The href of a link to `path`, a file or folder (ending in `/`) inside the run folder, given relative to it;
    None (no link) when `path` is empty, absolute, climbs out with `..`, starts with a scheme (`javascript:`,
    `data:`, `C:`) or holds a control character or a backslash. Each part is percent-encoded, so no name becomes a
    scheme, a query or a fragment.

    `base` is the kit's own relative path from the page to the run folder (`../other-run/`); with `climb`, a
    leading run of `..` in `path` is taken as the kit's own too: a trajectory's link climbs from the run folder to
    the predictions file's folder (`os.path.relpath` of two folders the operator named), and only what follows is
    the prediction's name, held to the rules above."""
    if not isinstance(path, str) or not path or _CONTROL.search(path) or _BREAK.search(path) or "\\" in path:
        return None
    if climb:
        parts = path.split("/")
        ups = next((i for i, part in enumerate(parts) if part != ".."), len(parts))
        base, path = base + "../" * ups, "/".join(parts[ups:])
    names = PurePosixPath(path).parts
    if path.startswith("/") or not names or ".." in names or _SCHEME.match(names[0]) or _unsafe_base(base):
        return None
    href = "/".join(quote(name, safe="") for name in names) + ("/" if path.endswith("/") else "")
    return f"{base.rstrip('/')}/{href}" if base else href


def _unsafe_base(base: str) -> bool:
    return bool(base) and (base.startswith("/") or bool(_SCHEME.match(base)) or bool(_CONTROL.search(base))
                           or "\\" in base)
