"""timeline.html: one scenario's `Timeline` as one self-contained page (an SVG picture, tables and details).

The picture is drawn here as SVG, time running left to right: one lane per agent (and the manager's), then the
integrated state's lane (merges, the final state), then one row per dependency point (when its upstream, downstream
and integrated probes first passed; the CAIL gap drawn between the first two). It needs no script; the inline
script only opens an entry's details when its mark is clicked. Every value from the run is untrusted: text in the
SVG goes through `escape(html_text(...))`, the template's through Jinja's autoescape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from asyncodebench.reports.htmlpage import TEMPLATES, render
from asyncodebench.reports.timeline import INTEGRATED, MANAGER, Entry, Timeline
from asyncodebench.untrusted import html_text

LABEL, LANE, ROW, TOP, END = 128, 34, 26, 30, 230  # lane names, a lane's height, a probe row's, the axis, the end
MIN_WIDTH, MAX_WIDTH, PER_MARK = 760, 12_000, 9  # the plot's width: PER_MARK px per mark, within these bounds
KIND_CLASS = {"prompt": "mp", "response": "mr", "command": "mc", "inbox": "mi", "error": "me", "exit": "mx"}
MERGE_CLASS = {"clean": "g-ok", "conflict": "g-bad", "scope violation": "g-bad"}


def _t(value: Any) -> Markup:
    """Run text for the SVG: control characters out, escaped."""
    return escape(html_text(str(value)))


def entry_id(lane: int, run: int, entry: Entry) -> str:
    """The id of an entry's details (the mark links to it)."""
    return f"e-{lane}-{run}-{entry.index}"


class _Axis:
    """x of a moment: wall-clock seconds or a sequence position, scaled to the plot."""

    def __init__(self, timeline: Timeline, marks: int) -> None:
        self.span = max(timeline.span, 1e-6)
        self.width = max(MIN_WIDTH, min(MAX_WIDTH, marks * PER_MARK))

    def x(self, at: float | None) -> float:
        at = self.span if at is None else min(max(at, 0.0), self.span)
        return round(LABEL + 8 + (self.width - 16) * at / self.span, 1)


def _sequence_positions(timeline: Timeline) -> dict[tuple[int, int, int], float]:
    """Without wall-clock times: an entry sits at its response number (what follows a response just after it)."""
    positions = {}
    for li, lane in enumerate(timeline.lanes):
        for ri, run in enumerate(lane.runs):
            number = 0.0
            for entry in run.entries:
                if entry.response is not None:
                    number = float(entry.response)
                positions[(li, ri, entry.index)] = number if entry.response is not None else number + 0.4
    return positions


def _at(timeline: Timeline, seq: dict[tuple[int, int, int], float], key: tuple[int, int, int],
        entry: Entry) -> float | None:
    return entry.at if timeline.axis == "wall clock" else seq.get(key)


def _checkpoint_at(timeline: Timeline, step: int) -> float | None:
    if timeline.axis == "sequence":
        return float(step)
    found = next((c for c in timeline.checkpoints if c.step == step), None)
    return found.at if found else None


def picture(timeline: Timeline) -> Markup:
    """The whole SVG: axis, lanes with their marks, arrows, merges, probe rows, the verdict at the end."""
    marks = sum(len(run.entries) for lane in timeline.lanes for run in lane.runs) + len(timeline.checkpoints)
    axis = _Axis(timeline, marks)
    seq = _sequence_positions(timeline)
    lanes = [lane.lane_id for lane in timeline.lanes] + [INTEGRATED]
    y_of = {lane: TOP + i * LANE + LANE / 2 for i, lane in enumerate(lanes)}
    probes_top = TOP + len(lanes) * LANE + 8
    height = probes_top + len(timeline.probes) * ROW + 12
    width = LABEL + axis.width + END  # room for the verdict at the end
    out = [f'<svg class="tl" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           'aria-labelledby="picture-caption">',
           '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker></defs>']
    out.append(_axis_svg(timeline, axis, height))
    for i, lane_id in enumerate(lanes):
        top = TOP + i * LANE
        out.append(f'<rect class="{"band" if i % 2 == 0 else "band2"}" x="0" y="{top}" width="{width}" '
                   f'height="{LANE}"/>')
        name = lane_id if len(lane_id) <= 18 else lane_id[:17] + "\u2026"
        out.append(f'<text class="lane" x="4" y="{top + LANE / 2 + 4}">{_t(name)}<title>{_t(lane_id)}</title>'
                   '</text>')
    for step_c in timeline.checkpoints:  # a faint guide at each checkpoint, through every row
        x = axis.x(_checkpoint_at(timeline, step_c.step))
        out.append(f'<line class="guide" x1="{x}" x2="{x}" y1="{TOP}" y2="{height - 8}"/>')
    for li, lane in enumerate(timeline.lanes):
        y = y_of[lane.lane_id]
        for ri, run in enumerate(lane.runs):
            placed = [(axis.x(_at(timeline, seq, (li, ri, e.index), e)), e) for e in run.entries]
            if placed:
                out.append(f'<line class="run" x1="{placed[0][0]}" x2="{placed[-1][0]}" y1="{y}" y2="{y}"/>')
            for x, entry in placed:
                out.append(_mark(x, y, entry, entry_id(li, ri, entry), run.label))
    for arrow in timeline.arrows:
        if arrow.target not in y_of:
            continue
        x = axis.x(arrow.at)
        y1, y2 = y_of.get(arrow.source, y_of.get(MANAGER, TOP)), y_of[arrow.target]
        y2 += -9 if y2 > y1 else 9
        cls = "ar-" + arrow.kind.replace(" ", "").replace("-", "")
        out.append(f'<line class="arrow {cls}" x1="{x}" x2="{x + 6}" y1="{y1}" y2="{y2}" marker-end="url(#arrow)">'
                   f'<title>{_t(arrow.kind)}: {_t(arrow.source)} to {_t(arrow.target)}'
                   f'{"" if arrow.posted is not False else " (not delivered)"}</title></line>')
    y = y_of[INTEGRATED]
    for merge in timeline.merges:
        at = merge.at if timeline.axis == "wall clock" else (float(merge.step) if merge.step else None)
        x = axis.x(at)
        cls = MERGE_CLASS.get(merge.status, "g-warn")
        files = ", ".join(merge.files) or ("no files" if merge.files_recorded else "files not recorded")
        out.append(f'<a href="#merge-{timeline.merges.index(merge)}"><rect class="merge {cls}" x="{x - 5}" '
                   f'y="{y - 8}" width="10" height="16"><title>merge of {_t(merge.agent_id)}: {_t(merge.status)} '
                   f'({_t(files)})</title></rect></a>')
        if merge.agent_id in y_of:  # the artifact travels from its lane down to the integrated state
            out.append(f'<line class="mergeline" x1="{x}" x2="{x}" y1="{y_of[merge.agent_id] + 6}" y2="{y - 9}"/>')
    final = next((c for c in timeline.checkpoints if c.kind == "final_integrated"), None)
    if final is not None:
        x = axis.x(_checkpoint_at(timeline, final.step))
        out.append(f'<circle class="final" cx="{x}" cy="{y}" r="6"><title>final integrated state (step '
                   f'{final.step})</title></circle>')
    for mark in timeline.sad:  # a triangle over the consumer's response that added the symbol
        if mark.agent_id not in y_of or mark.response is None:
            continue
        x = axis.x(mark.at if timeline.axis == "wall clock" else float(mark.response))
        above = y_of[mark.agent_id] - 16
        out.append(f'<path class="sad" d="M{x - 5},{above} h10 l-5,7 z"><title>SAD-proxy candidate '
                   f'{_t(mark.symbol)} in {_t(mark.file)} (response {mark.response})</title></path>')
    for k, row in enumerate(timeline.probes):
        out.append(_probe_svg(timeline, axis, row, probes_top + k * ROW))
    out.append(_verdict_svg(timeline, LABEL + axis.width + 6, TOP + 14))
    out.append("</svg>")
    return Markup("".join(out))


def _axis_svg(timeline: Timeline, axis: _Axis, height: int) -> str:
    parts = [f'<text class="axis" x="4" y="14">{"seconds" if timeline.axis == "wall clock" else "step"}</text>']
    ticks = 8
    for k in range(ticks + 1):
        at = timeline.span * k / ticks
        label = f"{at:.1f}" if timeline.axis == "wall clock" and timeline.span < 20 else f"{at:.0f}"
        x = axis.x(at)
        parts.append(f'<line class="tick" x1="{x}" x2="{x}" y1="18" y2="{TOP}"/>'
                     f'<text class="axis" x="{x}" y="14" text-anchor="middle">{label}</text>')
    return "".join(parts)


def _mark(x: float, y: float, entry: Entry, target: str, run_label: str) -> str:
    cls = KIND_CLASS.get(entry.kind, "mp")
    title = f"{_t(run_label)}: {_t(entry.title)}"
    if entry.kind == "response":
        shape = f'<circle class="mark {cls}" cx="{x}" cy="{y}" r="5">'
    elif entry.kind == "command":
        bad = " bad" if entry.exit_code not in (0, None) else ""
        shape = f'<rect class="mark {cls}{bad}" x="{x - 3.5}" y="{y + 5}" width="7" height="7">'
    elif entry.kind == "inbox":
        shape = f'<path class="mark {cls}" d="M{x},{y - 12} l5,5 l-5,5 l-5,-5 z">'
    elif entry.kind == "error":
        shape = f'<rect class="mark {cls}" x="{x - 4}" y="{y - 13}" width="8" height="8">'
    else:
        shape = f'<rect class="mark {cls}" x="{x - 1.5}" y="{y - 7}" width="3" height="14">'
    tag = shape.split(" ", 1)[0][1:]
    return f'<a href="#{target}">{shape}<title>{title}</title></{tag}></a>'


def _probe_svg(timeline: Timeline, axis: _Axis, row: Any, y: float) -> str:
    mid = y + ROW / 2
    name = row.dependency_id.rsplit(".", 1)[-1]
    name = name if len(name) <= 18 else name[:17] + "\u2026"
    parts = [f'<text class="dep" x="4" y="{mid + 4}">{_t(name)}<title>{_t(row.dependency_id)}</title></text>']
    up_x = axis.x(_checkpoint_at(timeline, row.up)) if row.up else None
    down_x = axis.x(_checkpoint_at(timeline, row.down)) if row.down else None
    if up_x is not None and down_x is not None and down_x != up_x:
        parts.append(f'<line class="cail" x1="{up_x}" x2="{down_x}" y1="{mid}" y2="{mid}">'
                     f'<title>CAIL gap: {row.cail_raw} step(s) from producer to consumer</title></line>')
    for step, letter, cls in ((row.up, "U", "pu"), (row.down, "D", "pd"), (row.drs, "I", "pi")):
        if step:
            x = axis.x(_checkpoint_at(timeline, step))
            offset = {"U": -7, "D": 0, "I": 7}[letter] if up_x == down_x else 0
            parts.append(f'<circle class="{cls}" cx="{x + offset}" cy="{mid}" r="6"><title>{letter} first passed '
                         f'at step {step}</title></circle>')
    if not row.resolved:
        parts.append(f'<text class="unresolved" x="{LABEL + axis.width + 6}" y="{mid + 4}">unresolved</text>')
    return "".join(parts)


def _verdict_svg(timeline: Timeline, x: float, y: float) -> str:
    v = timeline.verdict
    lines = [v.status if v.outcome is None else v.outcome, f"trust: {v.trust or 'n/a'}"]
    if v.tests:
        lines.append(f"tests {v.tests}")
    lines.append(f"{len(v.flags)} flag(s)")
    return "".join(f'<text class="verdict" x="{x}" y="{y + 16 * k}">{_t(text)}</text>' for k, text in enumerate(lines))


def lane_rows(timeline: Timeline) -> list[dict[str, Any]]:
    """The lanes as the page lists them: per run, its entries with their ids."""
    out = []
    for li, lane in enumerate(timeline.lanes):
        runs = [{"run": run, "entries": [{"entry": e, "id": entry_id(li, ri, e)} for e in run.entries]}
                for ri, run in enumerate(lane.runs)]
        out.append({"lane": lane, "runs": runs,
                    "responses": sum(run.responses for run in lane.runs)})
    return out


def render_timeline(timeline: Timeline) -> str:
    """The page of one timeline."""
    return render("timeline.html.j2", t=timeline, svg=picture(timeline), lanes=lane_rows(timeline),
                  timeline_style=Markup((TEMPLATES / "timeline.css").read_text()))


def write_timeline_html(timeline: Timeline, path: Path) -> Path:
    """Write the page atomically."""
    from asyncodebench.files import write_atomic

    write_atomic(path, render_timeline(timeline))
    return path
