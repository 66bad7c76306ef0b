"""Plot dependency resolution over checkpoint steps, one line per (model, protocol) group."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any


def resolution_curves(predictions: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per group, the share of dependency points whose integrated probes pass at step k (index 0 is step 1),
    averaged over the group's predictions: rises when a contract is met, falls when it regresses."""
    per_group: dict[str, list[list[float]]] = defaultdict(list)
    for p in predictions:
        trace = p.get("dependency_trace") or {}
        if p["status"] != "evaluated" or not trace:
            continue
        steps = len(next(iter(trace.values())))
        curve = []
        for k in range(1, steps + 1):
            curve.append(sum(dep[k - 1]["integrated"] for dep in trace.values()) / len(trace))
        per_group[f"{p['model_name_or_path']} / {p['protocol']}"].append(curve)
    return {group: _mean_curves(curves) for group, curves in sorted(per_group.items())}


def _mean_curves(curves: list[list[float]]) -> list[float]:
    """Mean over curves of different lengths; a run that ended keeps its last value."""
    length = max(len(c) for c in curves)
    padded = [c + [c[-1]] * (length - len(c)) for c in curves]
    return [sum(values) / len(values) for values in zip(*padded)]


def plot_resolution(predictions: list[dict[str, Any]], path: Path) -> Path | None:
    """Write the PNG; None when no prediction has a dependency trace.

    Labels are drawn as written: model names are user data, so `$...$` is never read as mathtext.
    """
    curves = resolution_curves(predictions)
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        figure, axes = plt.subplots(figsize=(8, 4.5), dpi=120)
        try:
            styles = ["-", "--", "-.", ":"]
            for i, (group, curve) in enumerate(curves.items()):
                lift = 0.012 * (i - len(curves) / 2)  # keeps identical curves visible side by side
                axes.plot(range(1, len(curve) + 1), [v + lift for v in curve], styles[i % len(styles)], marker="o",
                          label=group)
            axes.xaxis.get_major_locator().set_params(integer=True)
            axes.set_xlabel("logical step (checkpoint)")
            axes.set_ylabel("share of dependency points passing")
            axes.set_ylim(-0.06, 1.06)
            axes.set_title("Integrated dependency probes passing, by checkpoint step")
            axes.grid(alpha=0.3)
            axes.legend(fontsize=7, loc="lower right")
            figure.tight_layout()
            figure.savefig(path)
        finally:
            plt.close(figure)
    return path
