"""compare.html: the paired comparisons of `reports.compare` as one self-contained page (tables per view)."""

from __future__ import annotations

from typing import Any

from asyncodebench.dataset.protocols import display_name
from asyncodebench.reports import htmlsvg
from asyncodebench.reports.htmlpage import kit_doc_href, render

VIEWS = (
    ("protocols", "Protocols against single",
     "For each model: each protocol (b) against the same model's single agent (a).", ("model", "protocol b")),
    ("models", "Models against each other", "For each protocol: each pair of models, b against a.",
     ("protocol", "model a", "model b")),
    ("runs", "The same cell across runs", "The same (model, protocol) in a later run (b) against the first run (a).",
     ("model", "protocol", "run a", "run b")),
)


def keys(view: str, record: dict[str, Any]) -> list[str]:
    """The cells that name one comparison of a view, in the order of the view's headers."""
    a, b = record["a"], record["b"]
    if view == "protocols":
        return [a["subject"], display_name(b["protocol"])]
    if view == "models":
        return [display_name(a["protocol"]), a["subject"], b["subject"]]
    return [a["model"], display_name(a["protocol"]), a["run"], b["run"]]


def _scale(record: dict[str, Any]) -> float:
    """Shares are shown in percentage points, steps as they are."""
    return 100 if record["unit"] == "share" else 1


def note_href(link: str) -> str | None:
    """Where a note's link opens (`htmlpage.kit_doc_href`: the document's copy in the release's Hub repository)."""
    return kit_doc_href(link)


def view_rows(view: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one view's table with what the template shows; glyph axes shared per unit so rows compare."""
    reach = {unit: max([abs(r[k]) for r in records if r["unit"] == unit and r["ci_low"] is not None
                        for k in ("ci_low", "ci_high")] + [1e-9]) for unit in ("share", "steps")}
    reach["share"] = 1.0  # a share moves at most 100 points either way: one fixed axis
    rows = []
    for r in records:
        scale, span = _scale(r), reach[r["unit"]]
        rows.append({**r, "scale": scale, "names": keys(view, r),
                     "glyph": htmlsvg.interval_glyph(r["mean_difference"], r["ci_low"], r["ci_high"], -span, span,
                                                     zero=0)})
    return rows


def render_compare(record: dict[str, Any]) -> str:
    """The comparison page for a comparison record (what `compare.json` holds), one section per view."""
    views = [{"id": view, "title": title, "text": text, "headers": headers,
              "rows": view_rows(view, [c for c in record["comparisons"] if c["view"] == view])}
             for view, title, text, headers in VIEWS]
    notes = [{**note, "href": note_href(note["link"])} for note in record["notes"]]
    return render("compare.html.j2", record=record, views=views, check=record["dataset_check"],
                  cells=record["cells"], metrics=list(record["metrics"]), notes=notes)
