"""Self-contained HTML pages: Jinja2 templates with the stylesheet and the script written inline.

A page loads nothing: no stylesheet, script, font or image from anywhere, and its Content-Security-Policy forbids
fetching (only inline styles and scripts run), so it opens offline and from a file. Every value is escaped by Jinja's
autoescape, after its control characters are taken out: model names, file names and output are user data.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from asyncodebench import __version__
from asyncodebench.dataset.protocols import display_name
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.untrusted import html_text

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _number(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def percent(value: float | None, digits: int = 1) -> str:
    """A share as a percentage without the sign (column headers say %), n/a when not measured."""
    return "n/a" if value is None else f"{value * 100:.{digits}f}"


def interval(estimate: dict[str, Any] | None, scale: float = 100, digits: int = 1) -> str:
    """`mean [low, high]` of a report estimate, n/a when nothing was scored."""
    if not estimate or estimate.get("mean") is None:
        return "n/a"
    mean, low, high = (estimate[k] * scale for k in ("mean", "ci_low", "ci_high"))
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def p_value(value: float | None) -> str:
    """A p-value to three places; below that, an upper bound instead of a misleading 0.000."""
    if value is None:
        return "n/a"
    return "<0.001" if value < 0.0005 else f"{value:.3f}"


def bounds(estimate: dict[str, Any] | None, scale: float = 100, digits: int = 1) -> str:
    """`[low, high]` of a report estimate, empty when nothing was scored (shown under the mean)."""
    if not estimate or estimate.get("ci_low") is None:
        return ""
    return f"[{estimate['ci_low'] * scale:.{digits}f}, {estimate['ci_high'] * scale:.{digits}f}]"


def sort_key(value: Any) -> str:
    """What a cell sorts by (data-sort): numbers as numbers, missing values last in both directions (empty)."""
    if isinstance(value, dict):
        value = value.get("mean")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


KIT_ROOT = Path(__file__).resolve().parents[2]  # the kit's source tree, which holds docs/METRICS.md
METRICS_DOC = "docs/METRICS.md"
HUB_LINK = re.compile(r"(https://huggingface\.co/\S+[^\s.,;:)])")


def kit_doc_href(link: str) -> str | None:
    """Where a link to a kit document (`docs/METRICS.md#anchor`) opens from a page that may be written anywhere, or
    sent to someone else: the document's copy in the release's Hub repository (the card links it, so it is
    published with it); None (shown as text) when this kit has no such file to publish."""
    path, _, anchor = link.partition("#")
    if not (KIT_ROOT / path).is_file():
        return None
    return f"https://huggingface.co/datasets/{DEFAULT_DATASET}/blob/{DEFAULT_REVISION}/{path}" + (
        f"#{anchor}" if anchor else "")


def linked(text: str) -> Markup:
    """Text with its Hub addresses as links (the notes of report.json end with one); everything else escaped."""
    parts = HUB_LINK.split(str(text))
    return Markup("").join(Markup('<a href="{0}">{0}</a>').format(part) if i % 2 else part
                           for i, part in enumerate(parts))


def _environment() -> jinja2.Environment:
    # finalize: every value a template writes, text and attributes alike, loses its control characters before
    # autoescape escapes it (`untrusted.html_text`).
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=html_text,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(number=_number, percent=percent, interval=interval, bounds=bounds, pvalue=p_value,
                       sortkey=sort_key, protocol=display_name, linked=linked)
    return env


_ENV: jinja2.Environment | None = None


def render(template: str, **context: Any) -> str:
    """Render a page template; the shared stylesheet and table script go inline."""
    global _ENV
    if _ENV is None:  # built once per process: the loader caches compiled templates
        _ENV = _environment()
    assets = {"style": Markup((TEMPLATES / "page.css").read_text()),
              "script": Markup((TEMPLATES / "tables.js").read_text()), "version": __version__,
              "metrics_href": kit_doc_href(f"{METRICS_DOC}#decisions-for-this-project")}
    return _ENV.get_template(template).render(**assets, **context)
