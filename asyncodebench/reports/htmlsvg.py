"""Small inline SVG pictures for the HTML pages: the dependency timeline of one prediction and an interval glyph.

Written by hand rather than with a charting library because each is a handful of rectangles repeated hundreds of
times per page: runs of equal cells are merged into one rectangle and colours come from the page's stylesheet, which
keeps a 285-prediction page small. They hold numbers and fixed letters only, never user data.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from markupsafe import Markup

CELL, LANE, GAP = 22, 10, 2  # one checkpoint column, one probe-group lane (fits the 10 px letters), the space
LANES = (("upstream", "U", "u"), ("downstream", "D", "d"), ("integrated", "I", "i"))
LABEL = 12  # room for the lane letters (10 px) on the left


def first_pass(steps: list[dict[str, Any]], group: str, integrated_only: bool = False) -> int | None:
    """The first step at which a probe group passes; with `integrated_only`, counting only integrated-workspace
    checkpoints (agent workspaces never resolve a contract)."""
    for step in steps:
        if step[group] and (not integrated_only or step["workspace_kind"] == "integrated_workspace"):
            return step["step"]
    return None


def _runs(values: list[Any]) -> list[tuple[int, int, Any]]:
    """(start index, length, value) of each run of equal consecutive values."""
    out, start = [], 0
    for value, members in groupby(values):
        length = len(list(members))
        out.append((start, length, value))
        start += length
    return out


def timeline(steps: list[dict[str, Any]], columns: int) -> Markup:
    """Three lanes (upstream, downstream, integrated) over checkpoints 1..T, drawn `columns` wide so the rows of one
    table line up. Filled: the group passes at that step; grey: it does not. Framed (dashed) columns are agent
    workspaces; the outlined integrated cell is the first integrated-workspace step where the contract holds."""
    width, height = LABEL + CELL * columns, 3 * (LANE + GAP)
    # aria-hidden: the same facts are in the row's cells as text (first U, D, I steps), so a screen reader has them.
    parts = [f'<svg class="timeline" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'aria-hidden="true">']
    resolved = first_pass(steps, "integrated", integrated_only=True)
    for lane, (group, letter, css) in enumerate(LANES):
        y = lane * (LANE + GAP)
        parts.append(f'<text x="0" y="{y + LANE - 1}">{letter}</text>')
        for start, length, passed in _runs([bool(s[group]) for s in steps]):
            parts.append(f'<rect class="{css if passed else "no"}" x="{LABEL + start * CELL + 1}" y="{y}" '
                         f'width="{length * CELL - 2}" height="{LANE}"/>')
    agent = [s["workspace_kind"] == "agent_workspace" for s in steps]
    for start, length, is_agent in _runs(agent):  # a dashed frame, so the cells' colours stay as they are
        if is_agent:
            parts.append(f'<rect class="aw" x="{LABEL + start * CELL + 0.5}" y="0.5" width="{length * CELL - 1}" '
                         f'height="{height - 1}"/>')
    if resolved is not None:
        y = 2 * (LANE + GAP)
        parts.append(f'<rect class="first" x="{LABEL + (resolved - 1) * CELL + 0.5}" y="{y - 0.5}" '
                     f'width="{CELL - 1}" height="{LANE + 1}"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def step_axis(columns: int) -> Markup:
    """The step numbers 1..T above a column of timelines."""
    width = LABEL + CELL * columns
    labels = "".join(f'<text x="{LABEL + (k - 0.5) * CELL}" y="10" text-anchor="middle">{k}</text>'
                     for k in range(1, columns + 1))
    return Markup(f'<svg class="timeline" width="{width}" height="12" viewBox="0 0 {width} 12" role="img" '
                  f'aria-label="checkpoint steps 1 to {columns}">{labels}</svg>')


def interval_glyph(mean: float | None, low: float | None, high: float | None, lo: float, hi: float,
                   zero: float | None = None, width: int = 110) -> Markup:
    """A dot at the mean and a bar over [low, high] on an axis from `lo` to `hi`; a tick at `zero` when given (no
    difference). Empty when there is nothing to draw."""
    if mean is None or low is None or high is None or hi <= lo:
        return Markup("")

    def x(value: float) -> float:
        return round(4 + (width - 8) * (min(max(value, lo), hi) - lo) / (hi - lo), 1)

    zero_tick = f'<line class="zero" x1="{x(zero)}" x2="{x(zero)}" y1="1" y2="13"/>' if zero is not None else ""
    return Markup(f'<svg class="interval" width="{width}" height="14" viewBox="0 0 {width} 14" aria-hidden="true">'
                  f'<line class="axis" x1="4" x2="{width - 4}" y1="7" y2="7"/>{zero_tick}'
                  f'<line class="ci" x1="{x(low)}" x2="{x(high)}" y1="7" y2="7"/>'
                  f'<circle class="mean" cx="{x(mean)}" cy="7" r="3"/></svg>')
