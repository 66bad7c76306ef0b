"""Markdown as GitHub and the Hub render it: the anchors of a page's headings and the targets of its links.

Code is left out on purpose: a fenced block or an inline code span is shown as typed, so a `[x](y)` or a `# line`
there is neither a link nor a heading.
"""

from __future__ import annotations

import re
from collections import Counter

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
HEADING = re.compile(r"^#{1,6} +(.+?)(?: +#+)?[ \t]*$", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # https:, mailto:


def prose(text: str) -> str:
    """`text` without its fenced code blocks."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """A heading's anchor, GitHub style: the rendered text lower-cased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page; a repeated heading gets `-1`, `-2`, ... as GitHub numbers them."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(prose(text)):
        base = slug(heading)
        found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def links(text: str) -> list[str]:
    """The target of every link and picture of a page, in order, code left out."""
    return LINK.findall(CODE_SPAN.sub("", prose(text)))


def is_relative(target: str) -> bool:
    """A link to a file of the same tree (with or without an anchor), not a web address or a same-page anchor."""
    return not SCHEME.match(target) and not target.startswith("#")
