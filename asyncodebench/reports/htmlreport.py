"""report.html: the run report as one self-contained page, drawn from report.json alone.

Because it needs nothing but report.json, a rescored run and a run folder from an older version get the same page:

    python -m asyncodebench.reports.htmlreport RUN_DIR            # writes RUN_DIR/report.html
    python -m asyncodebench.reports.htmlreport RUN_DIR/report.json -o elsewhere.html

Fields that older reports lack (contract summaries, image sources, scope and review flags) are shown as not
recorded, or not at all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path, PurePosixPath
from typing import Any

from asyncodebench.dataset.protocols import PROTOCOLS, display_name
from asyncodebench.reports import htmlsvg, ranking
from asyncodebench.reports.flags import row_flags
from asyncodebench.reports.htmlpage import render
from asyncodebench.reports.report import dataset_source, sessions_text
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.runfolder import prediction_path
from asyncodebench.untrusted import page_link, terminal_text

# (report summary field, column header, factor shown, True when a rate drawn on a 0..100 axis)
HEADLINE = (
    ("fsr", "FSR %", 100, True), ("mean_pass_rate", "pass rate %", 100, True),
    ("mean_adpr", "ADPR macro %", 100, True), ("micro_adpr", "ADPR micro %", 100, False),
    ("mean_drs_penalized", "DRS (steps)", 1, False), ("mean_dre", "DRE %", 100, False),
    ("mean_cail_penalized", "CAIL (steps)", 1, False),
)
# (link text, file): the files a reader opens first; "files" is the prediction's whole folder, "timeline" its
# scenario on one time axis (`timeline_files`, written by evaluate.py and scripts/show_run.py).
ARTIFACTS = (("timeline", "timeline.html"), ("patch", "patch.diff"), ("result", "result.json"),
             ("output", "evaluator_output.txt"), ("files", ""))


def prediction_folder(row: dict[str, Any]) -> str:
    """The prediction's folder inside the run folder (`predictions/<slug>`), as the run folder names it."""
    return str(prediction_path(Prediction(line=row["line"], task_id=row["task_id"], protocol=row["protocol"],
                                          model=row["model_name_or_path"], run_id=row.get("prediction_run_id"),
                                          model_patch="", checkpoints=(), agent_patches={}, usage={})))


def prediction_rows(report: dict[str, Any], artifacts_base: str) -> list[dict[str, Any]]:
    """The predictions table: each row with its flags and links to its files, by task, model, protocol and line."""
    rows = []
    for row in sorted(report["predictions"], key=lambda p: (p["task_id"], p["model_name_or_path"], p["protocol"],
                                                            p["line"])):
        # Links are relative and stay inside the run folder (`untrusted.page_link`); a name that would not is shown
        # nowhere as a link.
        folder = page_link(f"{prediction_folder(row)}/", artifacts_base) or "#predictions"
        trajectories = [(PurePosixPath(link).stem, href) for link in row.get("trajectories") or []
                        if (href := page_link(link, artifacts_base, climb=True))]
        rows.append({**row, "flags": row_flags(row), "folder": folder,
                     "links": [(text, href) for text, name in ARTIFACTS
                               if (href := page_link(f"{prediction_folder(row)}/{name}", artifacts_base))],
                     "trajectory_links": trajectories})
    return rows


STEP_NAMES = {"agent_artifact": "agent artifact", "integration_after_merge": "merge", "final_integrated": "final state"}


def headline_table(report: dict[str, Any]) -> dict[str, Any]:
    """The headline: FSR per model, ranked overall and per protocol (`reports.ranking`), as the template shows it.

    Columns are the scopes (overall only when the run has more than one protocol), rows the models in their overall
    order; `state` says in words when a scope could not be ranked."""
    rankings = ranking.headline(report["predictions"], PROTOCOLS)
    if len(rankings) == 2:  # one protocol: overall is the same numbers again
        rankings = rankings[1:]
    if not rankings:
        return {"columns": [], "rows": [], "leaders": [], "state": None, "models": 0, "tasks": 0}
    first = rankings[0]
    columns = [{"scope": r.scope, "name": "Overall" if r.scope == ranking.OVERALL else display_name(r.scope),
                "state": r.state} for r in rankings]
    rows = [{"model": s.model, "cells": [r.of(s.model) for r in rankings]} for s in first.standings]
    leaders = [s for s in first.standings if s.rank == 1]
    tasks = len({p["task_id"] for p in report["predictions"] if p.get("status") == "evaluated"})
    return {"columns": columns, "rows": rows, "leaders": leaders, "state": first.state, "scope": columns[0]["name"],
            "models": len(first.standings), "tasks": tasks}


def timeline_steps(trace: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A prediction's checkpoints in order, each with how many of its dependency points pass per probe group."""
    series = list(trace.values())
    if not series:
        return []
    steps = []
    for k, step in enumerate(series[0]):
        at = [s[k] for s in series if k < len(s)]
        kind = STEP_NAMES.get(step["checkpoint_type"], step["checkpoint_type"])
        steps.append({"step": step["step"], "label": f"{kind} of {step['agent_id']}" if step.get("agent_id") else kind,
                      "agent_workspace": step["workspace_kind"] == "agent_workspace", "points": len(at),
                      **{group: sum(bool(s[group]) for s in at) for group in ("integrated", "upstream", "downstream")}})
    return steps


def cell_details(report: dict[str, Any], artifacts_base: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (model, protocol): its predictions as the drill-down shows them (outcome, flags, checkpoint timeline,
    the end of the evaluator's output, links to its files), by task and line."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in prediction_rows(report, artifacts_base):
        cells[(row["model_name_or_path"], row["protocol"])].append(
            {**row, "steps": timeline_steps(row.get("dependency_trace") or {})})
    return cells


def dependency_sections(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task, per dependency point: its contract and one timeline row per prediction that probed it."""
    contracts = report["run"].get("dependency_points") or {}
    traced: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for p in report["predictions"]:
        for dep_id, steps in (p.get("dependency_trace") or {}).items():
            traced[p["task_id"]][dep_id].append({"prediction": p, "steps": steps})
    for dep_id, contract in contracts.items():  # points never probed (--no-probes) still show their contract
        traced[contract["task_id"]].setdefault(dep_id, [])
    sections = []
    for task_id in sorted(traced):
        points = []
        for dep_id, entries in traced[task_id].items():
            columns = max((len(e["steps"]) for e in entries), default=0)
            rows = [{"model": e["prediction"]["model_name_or_path"], "protocol": e["prediction"]["protocol"],
                     "line": e["prediction"]["line"], "T": len(e["steps"]),
                     "first_up": htmlsvg.first_pass(e["steps"], "upstream"),
                     "first_down": htmlsvg.first_pass(e["steps"], "downstream"),
                     "first_integrated": htmlsvg.first_pass(e["steps"], "integrated", integrated_only=True),
                     "final": bool(e["steps"][-1]["integrated"]) if e["steps"] else None,
                     "svg": htmlsvg.timeline(e["steps"], columns)}
                    for e in sorted(entries, key=lambda e: (e["prediction"]["model_name_or_path"],
                                                            e["prediction"]["protocol"], e["prediction"]["line"]))]
            points.append({"id": dep_id, "contract": contracts.get(dep_id), "rows": rows,
                           "axis": htmlsvg.step_axis(columns) if columns else "",
                           "resolved": sum(bool(r["final"]) for r in rows)})
        sections.append({"task_id": task_id, "points": points})
    return sections


def headline_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary table: per summary row, one cell per `HEADLINE` metric (estimate, interval, glyph), the best FSR
    first."""
    rows = []
    for row in sorted(report["summary"], key=lambda r: (-((r.get("fsr") or {}).get("mean") or -1.0),
                                                      r["model_name_or_path"], r["protocol"])):
        cells = []
        for field, _, factor, glyph in HEADLINE:
            value = row.get(field)
            estimate = value if isinstance(value, dict) else {"mean": value, "ci_low": None, "ci_high": None}
            cells.append({"estimate": estimate, "factor": factor, "interval": isinstance(value, dict),
                          "glyph": htmlsvg.interval_glyph(estimate["mean"], estimate["ci_low"], estimate["ci_high"],
                                                          0, 1, width=72) if glyph else ""})
        rows.append({**row, "cells": cells})
    return rows


def settings_items(settings: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested settings as flat `a.b` keys, in their recorded order."""
    items = []
    for key, value in settings.items():
        if isinstance(value, dict):
            items += settings_items(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", value))
    return items


def image_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The images table: each task's image status with its provenance, by task."""
    sources = run.get("image_sources") or {}
    return [{**status, "task_id": task, "provenance": (sources.get(task) or {}).get("provenance", "not recorded")}
            for task, status in sorted((run.get("images") or {}).items())]


def resolution_figure(report: dict[str, Any]) -> tuple[str | None, str | None]:
    """(inline SVG, problem): the small-multiples figure; a figure that cannot be drawn leaves a note, not a
    failure (the tables carry every number)."""
    try:
        from asyncodebench.reports.plots import resolution_svg

        svg = resolution_svg(report["predictions"])
        # Named by its caption, whose table holds the same numbers as text.
        return (svg.replace("<svg ", '<svg role="img" aria-labelledby="resolution-caption" ', 1) if svg else None), None
    except Exception as exc:  # matplotlib or fonts missing or broken
        return None, f"The figure could not be drawn ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})."


def figure_data(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The figure's numbers as a table (its text alternative): per cell and probe group, the share passing at each
    step, in percent."""
    from asyncodebench.reports.plots import GROUPS, share_curves

    return [{"model": model, "protocol": protocol, "group": group, "predictions": curves["predictions"],
             "values": [round(v * 100) for v in curves[group]]}
            for (model, protocol), curves in share_curves(report["predictions"]).items() for group in GROUPS]


def render_report(report: dict[str, Any], artifacts_base: str = "") -> str:
    """The page for one report.json; `artifacts_base` is the run folder relative to where the page is written."""
    figure, figure_problem = resolution_figure(report)
    run = report["run"]
    return render(
        "report.html.j2", report=report, run=run, counts=report["counts"], headline=HEADLINE,
        ranking=headline_table(report), cells=cell_details(report, artifacts_base), figure_data=figure_data(report),
        summary=headline_rows(report), predictions=prediction_rows(report, artifacts_base),
        infrastructure=[p for p in report["predictions"] if p["status"] != "evaluated"],
        dependencies=dependency_sections(report), figure=figure, figure_problem=figure_problem,
        dataset_text=dataset_source(run["dataset"]).replace("`", ""), sessions_text=sessions_text(run),
        settings=settings_items(run.get("settings") or {}),
        images=image_rows(run), baselines=sorted((run.get("baselines") or {}).items()),
        has_contracts=bool(run.get("dependency_points")),
    )


def write_report_html(report: dict[str, Any], path: Path, run_dir: Path | None = None) -> Path:
    """Write the page to `path` atomically; links to artifacts point at `run_dir` (default: the page's folder)."""
    from asyncodebench.files import write_atomic

    base = ""
    if run_dir is not None and run_dir.resolve() != path.parent.resolve():
        base = Path(os.path.relpath(run_dir.resolve(), path.parent.resolve())).as_posix() + "/"
    write_atomic(path, render_report(report, base))
    return path


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module's docstring); 2 when the report cannot be read."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run folder, or its report.json")
    parser.add_argument("-o", "--output", type=Path, default=None, help="where to write (default: <run>/report.html)")
    args = parser.parse_args(argv)
    source = args.run / "report.json" if args.run.is_dir() else args.run
    try:
        report = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(terminal_text(f"error: cannot read {source}: {exc}"), file=sys.stderr)
        return 2
    output = args.output or source.parent / "report.html"
    write_report_html(report, output, run_dir=source.parent)
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
