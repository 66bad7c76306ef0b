"""The run report: JSON validated against `schemas/report.schema.json`, with Markdown and CSV beside it.

Scores are macro means over tasks within each (model, protocol) group, with 95% bootstrap intervals over tasks
(METRICS decision 7). Every valid prediction appears with its outcome; the counts reconcile.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from statistics import fmean
from typing import Any

from asyncodebench.metrics import MeanEstimate, macro_mean
from asyncodebench.predictions import PredictionFile
from asyncodebench.validation import validator

REPORT_SCHEMA_VERSION = "1.0"
NOTES = [
    "Pass rate = passed / expected total; a run that fails to collect, times out or whose patch does not apply "
    "scores 0 against the task's expected total and stays in every mean (the upstream aggregator drops such rows).",
    "Final success = exit code 0, tests collected, no failures or errors, and a real (not synthetic) report.",
    "ADPR = share of the task's dependency points whose integrated probes all pass in the final state; macro over "
    "tasks, micro pooled over dependency points.",
    "Infrastructure errors (daemon, image, overlay, harness) are reported apart and never scored.",
]
METRIC_KEYS = {  # report field -> result field (per-prediction value averaged per task, then over tasks)
    "fsr": "final_success", "mean_pass_rate": "pass_rate", "mean_adpr": "adpr",
    "mean_drs_penalized": "drs_penalized_mean", "mean_dre": "dre_mean", "mean_cail_penalized": "cail_penalized_mean",
    "mean_unresolved_dependencies": "unresolved_count", "mean_checkpoint_count": "checkpoint_count",
}


def build_report(metadata: dict[str, Any], file: PredictionFile, results: list[dict[str, Any]]) -> dict[str, Any]:
    """The full report; raises `jsonschema.ValidationError` if it breaks its own schema (a harness bug)."""
    evaluated = [r for r in results if r["status"] == "evaluated"]
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "run": metadata,
        "counts": {
            "valid_predictions": len(file.predictions),
            "invalid_lines": len(file.problems),
            "evaluated": len(evaluated),
            "infrastructure_errors": len(results) - len(evaluated),
            "not_evaluated": len(file.predictions) - len(results),
        },
        "line_problems": [{"line": p.line, "kind": p.kind, "message": p.message} for p in file.problems],
        "summary": summarize(results),
        "predictions": [prediction_row(r) for r in results],
        "notes": NOTES,
    }
    validator("report").validate(report)
    return report


def prediction_row(result: dict[str, Any]) -> dict[str, Any]:
    """One prediction's line in the report (the full record stays in its result.json)."""
    row = {k: result.get(k) for k in ("task_id", "protocol", "model_name_or_path", "prediction_run_id", "line", "status")}
    if result["status"] != "evaluated":
        return {**row, "infrastructure_error": result["infrastructure_error"]}
    metrics = result["run_metrics"]
    return {
        **row,
        "outcome": result["outcome"], "final_success": result["final_success"], "pass_rate": result["pass_rate"],
        "tests_passed": result["tests_passed"], "tests_denominator": result["tests_denominator"],
        "denominator_source": result["denominator_source"], "patch_status": result["patch"]["status"],
        "failure_kind": result["evaluator"]["failure_kind"], "hazards_removed": result["protection"]["hazards_removed"],
        "restored_paths": result["protection"]["restored_paths"],
        "adpr": result["adpr"], "adpr_numerator": result["adpr_numerator"],
        "adpr_denominator": result["adpr_denominator"],
        **{k: metrics.get(k) for k in ("checkpoint_count", "drs_penalized_mean", "dre_mean", "cail_penalized_mean",
                                       "unresolved_count")},
    }


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, protocol): counts, macro means with intervals, micro ADPR."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        groups[(result["model_name_or_path"], result["protocol"])].append(result)
    rows = []
    for (model, protocol), members in sorted(groups.items()):
        evaluated = [prediction_row(r) for r in members if r["status"] == "evaluated"]
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in evaluated:
            by_task[row["task_id"]].append(row)
        row = {"model_name_or_path": model, "protocol": protocol, "predictions": len(members),
               "evaluated": len(evaluated), "infrastructure_errors": len(members) - len(evaluated),
               "tasks": len(by_task)}
        for name, key in METRIC_KEYS.items():
            row[name] = _estimate(_per_task(by_task, key))
        points = sum(r["adpr_denominator"] for r in evaluated)
        row["micro_adpr"] = sum(r["adpr_numerator"] for r in evaluated) / points if points else None
        rows.append(row)
    return rows


def _per_task(by_task: dict[str, list[dict[str, Any]]], key: str) -> list[float]:
    """Each task's value: the mean over its predictions (repeated runs), skipping metrics a task does not have."""
    values = []
    for rows in by_task.values():
        scored = [float(r[key]) for r in rows if r.get(key) is not None]
        if scored:
            values.append(fmean(scored))
    return values


def _estimate(values: list[float]) -> dict[str, Any]:
    estimate: MeanEstimate = macro_mean(values)
    if not estimate.scored:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    return {"mean": estimate.mean, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high, "n": estimate.n}


def _fmt(estimate: dict[str, Any] | float | None, percent: bool = True) -> str:
    if isinstance(estimate, dict):
        if estimate["mean"] is None:
            return "unscored"
        scale = 100 if percent else 1
        return f"{estimate['mean'] * scale:.1f} [{estimate['ci_low'] * scale:.1f}, {estimate['ci_high'] * scale:.1f}]"
    if estimate is None or (isinstance(estimate, float) and math.isnan(estimate)):
        return "unscored"
    return f"{estimate * 100:.1f}" if percent else f"{estimate:.2f}"


def markdown(report: dict[str, Any]) -> str:
    """The report as people read it: summary first, then every prediction, then what was skipped."""
    run, counts = report["run"], report["counts"]
    lines = [
        f"# AsynCodeBench evaluation `{run['run_id']}`", "",
        f"Dataset `{run['dataset']['id']}` at `{run['dataset']['revision']}` "
        f"(commit `{run['dataset']['resolved_commit'][:12]}`), asyncodebench {run['tool']['version']}, "
        f"{run['started_at']} to {run['finished_at']}.", "",
        f"{counts['valid_predictions']} valid predictions: {counts['evaluated']} evaluated, "
        f"{counts['infrastructure_errors']} infrastructure errors, {counts['not_evaluated']} not evaluated; "
        f"{counts['invalid_lines']} invalid lines skipped.", "",
        "## Summary", "",
        "Macro means over tasks with 95% bootstrap intervals; rates in percent.", "",
        "| model | protocol | tasks | FSR | pass rate | ADPR (macro) | ADPR (micro) | DRS pen. | CAIL pen. | infra errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        lines.append(
            f"| {row['model_name_or_path']} | {row['protocol']} | {row['tasks']} | {_fmt(row['fsr'])} | "
            f"{_fmt(row['mean_pass_rate'])} | {_fmt(row['mean_adpr'])} | {_fmt(row['micro_adpr'])} | "
            f"{_fmt(row['mean_drs_penalized'], percent=False)} | {_fmt(row['mean_cail_penalized'], percent=False)} | "
            f"{row['infrastructure_errors']} |"
        )
    lines += ["", "## Predictions", "",
              "| line | model | protocol | task | outcome | passed | pass rate | ADPR | removed / restored |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in report["predictions"]:
        if p["status"] != "evaluated":
            error = p["infrastructure_error"]
            lines.append(f"| {p['line']} | {p['model_name_or_path']} | {p['protocol']} | {p['task_id']} | "
                         f"infrastructure: {error['kind']} | | | | |")
            continue
        guards = ", ".join(p["hazards_removed"] + p["restored_paths"]) or ""
        lines.append(
            f"| {p['line']} | {p['model_name_or_path']} | {p['protocol']} | {p['task_id']} | {p['outcome']} | "
            f"{p['tests_passed']}/{p['tests_denominator']} | {_fmt(p['pass_rate'])} | "
            f"{p['adpr_numerator']}/{p['adpr_denominator']} | {guards} |"
        )
    if report["line_problems"]:
        lines += ["", "## Skipped lines", ""] + [
            f"- line {p['line']} ({p['kind']}): {p['message']}" for p in report["line_problems"]]
    infra = [p for p in report["predictions"] if p["status"] != "evaluated"]
    if infra:
        lines += ["", "## Infrastructure errors (not scored; fix and rerun the same run id)", ""] + [
            f"- line {p['line']} {p['task_id']}: {p['infrastructure_error']['message'][:500]}" for p in infra]
    lines += ["", "## Notes", ""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def csv_text(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV; interval fields become `<name>`, `<name>_ci_low`, `<name>_ci_high`."""
    flat = []
    for row in rows:
        out: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, dict) and "mean" in value:
                out.update({key: value["mean"], f"{key}_ci_low": value["ci_low"], f"{key}_ci_high": value["ci_high"]})
            elif isinstance(value, (list, dict)):
                out[key] = "; ".join(map(str, value)) if isinstance(value, list) else str(value)
            else:
                out[key] = value
        flat.append(out)
    buffer = io.StringIO()
    if flat:
        writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(k for row in flat for k in row)))
        writer.writeheader()
        writer.writerows(flat)
    return buffer.getvalue()
