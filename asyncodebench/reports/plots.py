"""The dependency resolution figure: one small panel per (model, protocol) group, true values only.

Each panel shows, for every checkpoint step 1..T, the share of the group's dependency points whose upstream,
downstream and integrated probe groups pass (averaged over the group's predictions). Values are drawn where they
are: curves that coincide are told apart by line width and marker, never by shifting them off their value, so a
panel never shows a share below 0 or above 1. The legend sits above the panels, outside every axes.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from asyncodebench.dataset.protocols import display_name

GROUPS = ("integrated", "upstream", "downstream")
# Integrated first and widest, so upstream and downstream stay visible on top of it when the three coincide.
STYLE = {
    "integrated": {"color": "#2b8a3e", "linewidth": 4.0, "alpha": 0.45, "marker": "o", "markersize": 6},
    "upstream": {"color": "#1864ab", "linewidth": 1.4, "linestyle": "-", "marker": "^", "markersize": 4},
    "downstream": {"color": "#d9480f", "linewidth": 1.4, "linestyle": "--", "marker": "v", "markersize": 4},
}
MAX_COLUMNS = 6


def share_curves(predictions: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (model, protocol): for each probe group, the share of dependency points passing at step k
    (index 0 is step 1), averaged over the group's predictions. Predictions without a trace are left out."""
    per_group: dict[tuple[str, str], list[dict[str, list[float]]]] = defaultdict(list)
    for p in predictions:
        trace = p.get("dependency_trace") or {}
        if p["status"] != "evaluated" or not trace:
            continue
        steps = len(next(iter(trace.values())))
        per_group[(p["model_name_or_path"], p["protocol"])].append({
            group: [sum(dep[k][group] for dep in trace.values()) / len(trace) for k in range(steps)]
            for group in GROUPS})
    return {key: {"predictions": len(curves), **{group: _mean_curves([c[group] for c in curves]) for group in GROUPS}}
            for key, curves in sorted(per_group.items())}


def _mean_curves(curves: list[list[float]]) -> list[float]:
    """Mean over curves of different lengths; a run that ended keeps its last value."""
    length = max(len(c) for c in curves)
    padded = [c + [c[-1]] * (length - len(c)) for c in curves]
    return [sum(values) / len(values) for values in zip(*padded)]


def resolution_figure(predictions: list[dict[str, Any]]) -> Any:
    """The figure (a matplotlib Figure, caller closes it), or None when no prediction has a dependency trace.

    Labels are drawn as written: model names are user data, so `$...$` is never read as mathtext.
    """
    curves = share_curves(predictions)
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    columns = min(MAX_COLUMNS, len(curves))
    rows = math.ceil(len(curves) / columns)
    longest = max(len(c["integrated"]) for c in curves.values())
    # 8 pt is 10.7 px where a page shows the SVG at its own size (the page's smallest text is 10 px).
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False, "font.size": 8}):
        figure, axes = plt.subplots(rows, columns, figsize=(2.0 * columns + 0.4, 1.9 * rows + 0.9), dpi=110,
                                    sharex=True, sharey=True, squeeze=False, layout="constrained")
        for panel, ((model, protocol), group_curves) in zip(axes.flat, curves.items()):
            for group in GROUPS:
                values = group_curves[group]
                panel.plot(range(1, len(values) + 1), values, label=f"{group} probes", **STYLE[group])
            count = group_curves["predictions"]
            panel.set_title(f"{_short(model)}\n{display_name(protocol)}" + (f" ({count} runs)" if count > 1 else ""),
                            fontsize=8, parse_math=False)
        for panel in axes.flat[len(curves):]:
            panel.set_visible(False)
        for panel in axes.flat:
            panel.set_ylim(-0.06, 1.06)  # room for the markers at 0 and 1; the data never leave [0, 1]
            panel.set_xlim(0.6, longest + 0.4)
            panel.set_yticks([0, 0.5, 1])
            if longest <= 10:
                panel.set_xticks(range(1, longest + 1))
            else:
                panel.xaxis.get_major_locator().set_params(integer=True)
            panel.grid(alpha=0.3)
        for panel in axes[:, 0]:
            panel.set_ylabel("share passing")
        for panel in axes[-1, :]:
            panel.set_xlabel("checkpoint step")
        figure.suptitle("Dependency points whose probes pass, by checkpoint step "
                        "(mean over each cell's predictions)", fontsize=9)
        figure.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside lower center", ncols=3, frameon=False)
    return figure


def _short(text: str, limit: int = 28) -> str:
    """Panel titles keep to their panel's width; the full name is in the report's tables."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plot_resolution(predictions: list[dict[str, Any]], path: Path) -> Path | None:
    """Write the PNG; None when no prediction has a dependency trace."""
    figure = resolution_figure(predictions)
    if figure is None:
        return None
    import matplotlib.pyplot as plt

    try:
        figure.savefig(path)
    finally:
        plt.close(figure)
    return path


def resolution_svg(predictions: list[dict[str, Any]]) -> str | None:
    """The same figure as inline SVG text (fonts left as text, so it stays small and searchable); None without
    traces."""
    figure = resolution_figure(predictions)
    if figure is None:
        return None
    import matplotlib
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    try:
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "asyncodebench"}):
            figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    finally:
        plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: the SVG goes inside an HTML page
