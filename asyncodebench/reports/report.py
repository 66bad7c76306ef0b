"""The run report: JSON validated against `schemas/report.schema.json`, with Markdown and CSV beside it.

Scores are macro means over tasks within each (model, protocol) group, with 95% bootstrap intervals over tasks
(METRICS decision 7). Every valid prediction appears with its outcome; the counts reconcile. Each evaluated row
carries the last lines of its evaluator output (`output_tail`, bounded, as text) for the HTML page's drill-down.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from asyncodebench.dataset import reference_results
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.dataset.validation import validator
from asyncodebench.reports.flags import row_flags
from asyncodebench.reports.usage import row_usage, summarize_usage, trajectory_links
from asyncodebench.run.prediction_result import Evaluation, Integrity, PredictionResult
from asyncodebench.run.predictions import Prediction, PredictionFile
from asyncodebench.run.runfolder import prediction_path
from asyncodebench.run.store import OUTPUT
from asyncodebench.scoring.bootstrap import MeanEstimate, macro_mean
from asyncodebench.scoring.trust import TRUST_STATUSES
from asyncodebench.untrusted import csv_cell, markdown_cell, markdown_text, plain_text

REPORT_SCHEMA_VERSION = "1.1"  # 1.1: monitor, timeline_source/reason, self_reported_timelines
METRICS_DOC = "docs/METRICS.md"  # the kit's copy of the metrics document; notes link to its copy on the Hub
METRICS_URL = f"https://huggingface.co/datasets/{DEFAULT_DATASET}/blob/{DEFAULT_REVISION}/{METRICS_DOC}"
OUTPUT_TAIL_LINES, OUTPUT_TAIL_CHARS = 30, 2048  # of evaluator_output.txt, per report row (the file keeps 1 MB)
NOTES = [
    "Pass rate = passed / expected total; a run that fails to collect, times out or whose patch does not apply "
    "scores 0 against the task's expected total and stays in every mean (the upstream aggregator drops such rows).",
    "Final success = exit code 0, tests collected, no failures or errors, a real (not synthetic) report, no more "
    "skipped + xfailed tests than the task's base state in the same image, no test skipped or xfailed that was "
    "not skipped or xfailed there, and no fewer tests collected; a missing or unreadable report is a model outcome "
    "scored 0, since the code under test can cause it. The rules for final success, skips and who is to blame, in "
    f"docs/METRICS.md: {METRICS_URL}#decisions-for-this-project",
    "Edits outside the task's writable paths are flagged, not penalized: the tests are restored anyway.",
    "ADPR = share of the task's dependency points whose integrated probes all pass in the final state; macro over "
    "tasks, micro pooled over dependency points.",
    "Infrastructure errors (daemon, image, overlay, harness) are reported apart and never scored.",
    "Review flags point at lines the patches add that touch the test runner's machinery (imports of _pytest or "
    "pluggy, writes to sys.modules or builtins, exit hooks, os._exit, ctypes, exec, trace hooks, skips raised "
    "from code under test, .gitattributes/.gitmodules): read them; they are shown, never scored.",
]
NA = "n/a"
ROW_REVIEW_FLAGS = 20  # review flags a report row lists; result.json keeps up to 100, and the full count
METRIC_KEYS = {  # report field -> result field (per-prediction value averaged per task, then over tasks)
    "fsr": "final_success", "mean_pass_rate": "pass_rate", "mean_adpr": "adpr",
    "mean_drs_penalized": "drs_penalized_mean", "mean_dre": "dre_mean", "mean_cail_penalized": "cail_penalized_mean",
    "mean_unresolved_dependencies": "unresolved_count", "mean_checkpoint_count": "checkpoint_count",
}


def build_report(metadata: dict[str, Any], file: PredictionFile, results: Sequence[PredictionResult],
                 ) -> dict[str, Any]:
    """The full report (report.json's object) of the run's results, as `store.read_results` reads them; raises
    `jsonschema.ValidationError` if it breaks its own schema (a harness bug)."""
    evaluated = [r.evaluation for r in results if r.evaluation is not None]
    usage_rows = _usage_rows(metadata, file, results)
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
        "summary": summarize(results, usage_rows),
        "predictions": [{**_with_output_tail(prediction_row(r), metadata.get("run_folder")),
                         **usage_rows[r.identity.line]} for r in results],
        "notes": NOTES + _unmeasured_notes(evaluated) + _runner_merges_notes(evaluated),
    }
    validator("report").validate(report)
    return report


def _usage_rows(metadata: dict[str, Any], file: PredictionFile, results: Sequence[PredictionResult],
                ) -> dict[int, Any]:
    """Per result's line: the prediction's tokens, calls, cost and time, and links to its agents' trajectories."""
    by_line = {p.line: p for p in file.predictions}
    rows = {}
    for result in results:
        prediction = by_line.get(result.identity.line)
        rows[result.identity.line] = {} if prediction is None else {
            **row_usage(prediction),
            "trajectories": trajectory_links(prediction, Path(file.path), Path(metadata.get("run_folder") or "."))}
    return rows


def output_tail(path: Path) -> str | None:
    """The last lines of an evaluator output file, at most OUTPUT_TAIL_LINES lines and OUTPUT_TAIL_CHARS characters,
    as plain text (the output is the evaluated code's: pages escape it); None when the file cannot be read."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - OUTPUT_TAIL_CHARS))
            raw = file.read()
    except OSError:
        return None
    # Escape sequences and control characters (tab and newline kept) out: `untrusted.plain_text`.
    text = plain_text(raw.decode("utf-8", errors="replace"))
    if size > OUTPUT_TAIL_CHARS and "\n" in text:
        text = text.split("\n", 1)[1]  # the first line was cut by the byte limit
    return "\n".join(text.strip("\n").split("\n")[-OUTPUT_TAIL_LINES:])


def _with_output_tail(row: dict[str, Any], run_folder: str | None) -> dict[str, Any]:
    """An evaluated row with the end of its evaluator output from the run folder (rows of a report built without a
    run folder, like the synthetic ones, get none)."""
    if row["status"] != "evaluated" or not run_folder:
        return row
    prediction = Prediction(line=row["line"], task_id=row["task_id"], protocol=row["protocol"],
                            model=row["model_name_or_path"], run_id=row.get("prediction_run_id"), model_patch="",
                            checkpoints=(), agent_patches={}, usage={})
    return {**row, "output_tail": output_tail(Path(run_folder) / prediction_path(prediction) / OUTPUT)}


def dependency_points(specs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The contracts of the run's tasks by dependency id, for `run.dependency_points`: the HTML report shows each
    point's summary beside its timeline and must be drawn from report.json alone (old reports lack it)."""
    return {point.dependency_id: {"task_id": task_id, "producer_agent": point.producer_agent,
                                  "consumer_agent": point.consumer_agent, "contract_summary": point.contract_summary,
                                  "metrics_enabled": list(point.metrics_enabled)}
            for task_id, spec in sorted(specs.items()) for point in spec.dependencies}


def _unmeasured_notes(evaluated: list[Evaluation]) -> list[str]:
    unmeasured = sum(e.dependencies.adpr_numerator is None for e in evaluated)
    if not unmeasured:
        return []
    return [f"Dependency probes were not run (--no-probes) for {unmeasured} of {len(evaluated)} evaluated predictions: "
            "their ADPR, DRS, DRE, CAIL and unresolved counts are n/a (null) and left out of every mean."]


def _runner_merges_notes(evaluated: list[Evaluation]) -> list[str]:
    reported = sum(e.integration is not None and e.integration.source == "runner" for e in evaluated)
    if not reported:
        return []
    return [f"Merge conflict and scope violation figures marked (runner) come, for {reported} of {len(evaluated)} "
            "evaluated predictions, from the agent runner's own record of its merges (runner.merges): those "
            "predictions give their checkpoints, as the manager protocols' runs do, so the harness merges nothing "
            "to count. Reported, not recomputed, never scored."]


def _monitor_field(monitor: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A row's view of `integrity.monitor`: its status, verdict and why (the cited lines stay in result.json)."""
    if monitor is None:
        return None
    return {"status": monitor["status"], "suspicious": monitor.get("suspicious"), "why": monitor.get("why", "")}


def prediction_row(result: PredictionResult) -> dict[str, Any]:
    """One prediction's line in the report (the full record stays in its result.json)."""
    identity = result.identity
    row = {"task_id": identity.task_id, "protocol": identity.protocol,
           "model_name_or_path": identity.model_name_or_path, "prediction_run_id": identity.prediction_run_id,
           "line": identity.line, "status": result.status}
    e = result.evaluation
    if e is None:
        assert result.failure is not None
        return {**row, "infrastructure_error": result.failure.to_json()}
    metrics, integration, trust = e.dependencies.run_metrics, e.integration, result.trust
    timeline = e.dependencies.timeline or {}
    return {
        **row,
        "outcome": e.score.outcome, "final_success": e.score.final_success, "pass_rate": e.score.pass_rate,
        "tests_passed": e.score.tests_passed, "tests_denominator": e.score.tests_denominator,
        "denominator_source": e.score.denominator_source, "patch_status": e.patch.status,
        "failure_kind": e.evaluator.failure_kind, "hazards_removed": list(e.protection.hazards_removed),
        "restored_paths": list(e.protection.restored_paths),
        "out_of_scope_paths": list(e.protection.out_of_scope_paths),
        "dropped_by_runner": list(e.protection.dropped_by_runner),
        "image_provenance": e.image["provenance"],
        "integrity_violation": e.integrity.violation,
        "report_problem": e.integrity.report_problem,
        **_skip_and_review_fields(e.integrity),
        "trust_status": trust.status if trust is not None else None,
        "monitor": _monitor_field(e.integrity.monitor),
        "timeline_source": timeline.get("source"),
        "timeline_reason": timeline.get("reason") or None,
        "adpr": e.dependencies.adpr, "adpr_numerator": e.dependencies.adpr_numerator,
        "adpr_denominator": e.dependencies.adpr_denominator,
        **{k: metrics.get(k) for k in ("checkpoint_count", "drs_penalized_mean", "dre_mean", "cail_penalized_mean",
                                       "unresolved_count")},
        "agents_integrated": integration.agents if integration else 0,
        "merge_conflicts": integration.merge_conflicts if integration else 0,
        "scope_violations": integration.scope_violations if integration else 0,
        "integration_source": integration.source if integration else None,
        "sad_proxy_candidates": len(e.sad_proxy.candidates),
        "dependency_trace": e.dependencies.trace,
        "build": e.build.to_json() if e.build else None,
    }


def _skip_and_review_fields(integrity: Integrity) -> dict[str, Any]:
    """A row's view of decision 12, of the review flags and of the runtime audit's flags; None (or none) where the
    result predates them."""
    newly = integrity.skip_rules.get("newly_skipped") or {}
    review = integrity.review
    return {
        "audit_flags": sorted({a["event"] for a in integrity.audit})[:ROW_REVIEW_FLAGS],
        "newly_skipped_count": newly.get("count") if newly.get("checked") else None,
        "review_flag_count": review["count"] if review is not None else None,
        "review_flags": list(review["flags"])[:ROW_REVIEW_FLAGS] if review is not None else [],
    }


def summarize(results: Sequence[PredictionResult], usage_rows: dict[int, dict[str, Any]] | None = None,
              ) -> list[dict[str, Any]]:
    """One row per (model, protocol): counts, macro means with intervals, micro ADPR; with `usage_rows` (per line,
    `_usage_rows`), the tokens, calls, cost and time of all its predictions, evaluated or not (spent either way)."""
    groups: dict[tuple[str, str], list[PredictionResult]] = defaultdict(list)
    for result in results:
        groups[(result.identity.model_name_or_path, result.identity.protocol)].append(result)
    rows = []
    references = reference_results.load()
    for (model, protocol), members in sorted(groups.items()):
        evaluated = [prediction_row(r) for r in members if r.evaluation is not None]
        by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in evaluated:
            by_task[row["task_id"]].append(row)
        row = {"model_name_or_path": model, "protocol": protocol, "predictions": len(members),
               "evaluated": len(evaluated), "infrastructure_errors": len(members) - len(evaluated),
               "tasks": len(by_task)}
        # FSR is read against how many of the cell's tasks can succeed at all (data/reference_results.yaml).
        row["reachable_tasks"], row["unmeasured_tasks"] = reference_results.reachable_counts(set(by_task), references)
        for name, key in METRIC_KEYS.items():
            row[name] = _estimate(_per_task(by_task, key))
        probed = [r for r in evaluated if r["adpr_numerator"] is not None]  # null: probes were not run
        points = sum(r["adpr_denominator"] for r in probed)
        row["micro_adpr"] = sum(r["adpr_numerator"] for r in probed) / points if points else None
        row.update(_integration_rates(evaluated))
        row["integrity_violations"] = sum(bool(r["integrity_violation"]) for r in evaluated)
        row["out_of_scope_edits"] = sum(bool(r["out_of_scope_paths"]) for r in evaluated)  # flagged, not penalized
        row["review_flagged"] = sum(bool(r["review_flag_count"]) for r in evaluated)  # shown, never scored
        row["self_reported_timelines"] = sum(r.get("timeline_source") == "self_reported" for r in evaluated)
        row["trust"] = {status: sum(r.get("trust_status") == status for r in evaluated) for status in TRUST_STATUSES}
        if usage_rows is not None:
            row.update(summarize_usage([{"task_id": r.identity.task_id, **usage_rows.get(r.identity.line, {})}
                                        for r in members]))
        rows.append(row)
    return rows


def _integration_rates(rows: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """Merge conflicts and scope violations per integrated agent artifact, pooled over the group's predictions, and
    how many of those artifacts only the agent runner's own record describes (predictions giving checkpoints)."""
    integrated = [r for r in rows if r.get("agents_integrated")]
    artifacts = sum(r["agents_integrated"] for r in integrated)
    if not artifacts:
        return {"merge_conflict_rate": None, "scope_violation_rate": None, "artifacts_reported_by_runner": 0}
    return {"merge_conflict_rate": sum(r["merge_conflicts"] for r in integrated) / artifacts,
            "scope_violation_rate": sum(r["scope_violations"] for r in integrated) / artifacts,
            "artifacts_reported_by_runner": sum(r["agents_integrated"] for r in integrated
                                                if r.get("integration_source") == "runner")}


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


def _fmt(estimate: dict[str, Any] | float | None, percent: bool = True, missing: str = "unscored") -> str:
    if isinstance(estimate, dict):
        if estimate["mean"] is None:
            return missing
        scale = 100 if percent else 1
        return f"{estimate['mean'] * scale:.1f} [{estimate['ci_low'] * scale:.1f}, {estimate['ci_high'] * scale:.1f}]"
    if estimate is None or (isinstance(estimate, float) and math.isnan(estimate)):
        return missing
    return f"{estimate * 100:.1f}" if percent else f"{estimate:.2f}"


def _rate(row: dict[str, Any], key: str) -> str:
    """A summary row's merge or scope rate, marked (runner) when some of its artifacts are the runner's record."""
    text = _fmt(row[key], missing="n/a")
    return f"{text} (runner)" if row.get("artifacts_reported_by_runner") and row[key] is not None else text


def _flags(row: dict[str, Any]) -> str:
    """The row's flags (`flags.row_flags`, shared with the HTML page) as one Markdown table cell."""
    return markdown_cell("; ".join(flag.label for flag in row_flags(row)))


def trust_table(summary: list[dict[str, Any]]) -> list[str]:
    """Per cell, how many evaluated results are verified, need review (high-severity flags; their scores stand,
    publishing needs a review file) or are tampering (scored 0); nothing for a report made before trust statuses."""
    rows = [row for row in summary if isinstance(row.get("trust"), dict)]
    if not rows:
        return []
    lines = ["", "### Trust", "",
             "verified: no tampering, no high-severity review flag; needs review: read the flagged code before "
             "publishing (scripts/publish_results.py wants a review file); tampering: scored 0.", "",
             "| model | protocol | verified | needs review | tampering |", "|---|---|---|---|---|"]
    for row in rows:
        trust = row["trust"]
        lines.append(f"| {markdown_cell(row['model_name_or_path'])} | {markdown_cell(row['protocol'])} | "
                     f"{trust.get('verified', 0)} | "
                     f"{trust.get('needs_review', 0)} | {trust.get('integrity_tampering', 0)} |")
    return lines


def review_sections(predictions: list[dict[str, Any]]) -> list[str]:
    """The review flags of every prediction that has any, listed for a reader to check (they never score)."""
    flagged = [p for p in predictions if p.get("review_flag_count")]
    if not flagged:
        return []
    lines = ["", "## Review flags (shown, never scored)", "",
             "Added lines that touch the test runner's machinery, by file and line in the new file; read the patch "
             "there (the prediction's result.json lists up to 100).", ""]
    for p in flagged:
        lines += [f"**line {p['line']}: {_names(p)}** ({p['review_flag_count']} flag(s))", ""]
        for flag in p["review_flags"]:
            where = f"{flag['file']}:{flag['line']}" if flag.get("line") is not None else flag["file"]
            text = f" {code_span(flag['text'])}" if flag.get("text") else ""
            lines.append(f"- {code_span(where)} {markdown_text(flag['marker'])}{text} "
                         f"({markdown_text(flag.get('patch', 'patch'))})")
        if p["review_flag_count"] > len(p["review_flags"]):
            lines.append(f"- ... and {p['review_flag_count'] - len(p['review_flags'])} more")
        lines.append("")
    return lines


def usage_table(summary: list[dict[str, Any]]) -> list[str]:
    """Tokens, model calls, cost and time per cell, as the predictions report them (none reported: no table)."""
    if not any(row.get("usage_reported") or row.get("runtime_seconds") is not None for row in summary):
        return []
    lines = ["", "### Tokens, calls and time (reported, never scored)", "",
             "As each prediction reports them (`usage`); tokens are prompt + completion; means are macro over tasks.",
             "", "| model | protocol | reported | tokens (mean) | tokens (total) | model calls | runtime s (mean) | "
             "runtime s (total) | cost USD |", "|---|---|---|---|---|---|---|---|---|"]
    for row in summary:
        cells = [_count(row.get(k)) for k in ("mean_total_tokens", "total_tokens", "model_calls",
                                                "mean_runtime_seconds", "runtime_seconds")]
        cost = NA if row.get("cost_usd") is None else f"{row['cost_usd']:.2f}"
        lines.append(f"| {markdown_cell(row['model_name_or_path'])} | {markdown_cell(row['protocol'])} | "
                     f"{row.get('usage_reported', 0)}/"
                     f"{row['predictions']} | {' | '.join(cells)} | {cost} |")
    return lines


def _count(value: float | None) -> str:
    """A count as a whole number (with separators), a mean below 100 with one decimal."""
    if value is None:
        return NA
    return f"{value:,.0f}" if isinstance(value, int) or value >= 100 else f"{value:.1f}"


def build_table(predictions: list[dict[str, Any]]) -> list[str]:
    """The native builds (METRICS decision 13): per prediction, each state's build time in checkpoint order."""
    built = [p for p in predictions if p.get("build")]
    if not built:
        return []
    lines = ["", "## Native builds", "",
             "Each evaluated state is built once before its tests run; a failed build scores 0 (`build_failed`).", "",
             "| line | model | task | final build | states built | seconds per state (step: s) | total s |",
             "|---|---|---|---|---|---|---|"]
    for p in built:
        build = p["build"]
        final = build["final"]["status"] if build["final"] else "not run (patch)"
        steps = ", ".join(f"{s['step']}: {s['seconds']:.1f}" + ("" if s["status"] == "built" else f" {s['status']}")
                          for s in build["states"])
        lines.append(f"| {p['line']} | {markdown_cell(p['model_name_or_path'])} | {markdown_cell(p['task_id'])} | "
                     f"{markdown_cell(final)} | {build['states_built']} | {markdown_cell(steps)} | "
                     f"{build['seconds']:.1f} |")
    return lines


def code_span(text: str) -> str:
    """Markdown inline code that shows `text` as written: fenced with more backticks than any run inside it, so
    patch text can neither end the span nor be read as markup or HTML."""
    text = plain_text(" ".join(str(text).splitlines()))
    run = longest = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    if not text.strip():
        return f"`{text or ' '}`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _rebuilt_images(run: dict[str, Any]) -> list[str]:
    """Which tasks ran on an image other than the rows' official one (--images), and which image."""
    rebuilt = [f"- `{task}`: `{source['pinned_ref']}` ({source['provenance']})"
               for task, source in sorted((run.get("image_sources") or {}).items())
               if source.get("provenance") != "official"]
    return ["## Images other than the official ones", "", *rebuilt, ""] if rebuilt else []


def _image_problems(run: dict[str, Any]) -> list[str]:
    """The tasks whose base state in this image differs from the release's recorded counts (an image problem)."""
    problems = [f"- `{task}`: {markdown_text(b['problem'])}" for task, b in sorted((run.get("baselines") or {}).items())
                if b.get("problem")]
    return ["## Image problems", "", *problems, ""] if problems else []


def sessions_text(run: dict[str, Any]) -> str:
    """`, in 3 sessions (...)` for a run that was interrupted and resumed; nothing for a run of one session (or a
    report written before sessions were recorded)."""
    sessions = run.get("sessions") or []
    if len(sessions) < 2:
        return ""
    parts = []
    for s in sessions:
        evaluated = "?" if s.get("evaluated") is None else s["evaluated"]
        end = s.get("finished_at") or "ended without a word (killed)"
        parts.append(f"{s['started_at']} to {end}: {evaluated} evaluated"
                     f"{', interrupted' if s.get('ended') == 'interrupted' else ''}"
                     f"{', rescore' if s.get('mode') == 'rescore' else ''}")
    return f", in {len(sessions)} sessions ({'; '.join(parts)})"


def _cells(row: dict[str, Any], task: bool = False) -> str:
    """A row's model and protocol (and task) as Markdown table cells: the model name is the submitter's text."""
    names = [row["model_name_or_path"], row["protocol"], *([row["task_id"]] if task else [])]
    return " | ".join(markdown_cell(name) for name in names)


def _names(row: dict[str, Any]) -> str:
    """`model / protocol / task` of a prediction as Markdown inline text."""
    return " / ".join(markdown_text(row[k]) for k in ("model_name_or_path", "protocol", "task_id"))


def markdown(report: dict[str, Any], plot: str | None = None) -> str:
    """The report as people read it: summary first, then every prediction, then what was skipped.

    `plot` is the file name of the resolution plot beside the report, shown with the dependency traces.
    """
    run, counts = report["run"], report["counts"]
    lines = [
        f"# AsynCodeBench evaluation `{run['run_id']}`", "",
        f"{dataset_source(run['dataset'])}; asyncodebench {run['tool']['version']}, "
        f"{run['started_at']} to {run['finished_at']}{sessions_text(run)}.", "",
        f"{counts['valid_predictions']} valid predictions: {counts['evaluated']} evaluated, "
        f"{counts['infrastructure_errors']} infrastructure errors, {counts['not_evaluated']} not evaluated; "
        f"{counts['invalid_lines']} invalid lines skipped.", "",
        *_rebuilt_images(run),
        *_image_problems(run),
        "## Summary", "",
        "Macro means over tasks with 95% bootstrap intervals; rates in percent.", "",
        "Can succeed: the cell's tasks whose reference state (every writable file as upstream wrote it) passes every",
        "test, so that final success is reachable at all (data/reference_results.yaml); unmeasured ones are counted",
        "apart.", "",
        "| model | protocol | tasks | can succeed | FSR | pass rate | ADPR (macro) | ADPR (micro) | infra errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        lines.append(
            f"| {_cells(row)} | {row['tasks']} | {_reachable(row)} | {_fmt(row['fsr'])} | "
            f"{_fmt(row['mean_pass_rate'])} | {_fmt(row['mean_adpr'], missing=NA)} | "
            f"{_fmt(row['micro_adpr'], missing=NA)} | "
            f"{row['infrastructure_errors']} |"
        )
    lines += trust_table(report["summary"])
    lines += [
        "", "### Dependency timing", "",
        "T = checkpoints per run; DRS and CAIL penalized (T+1 when unresolved); DRE in percent; merge conflict and "
        "scope violation rates per integrated agent artifact (n/a: no agent patches were integrated; (runner): the "
        "agent runner's own record, see the notes).", "",
        "| model | protocol | T | DRS pen. | DRE | CAIL pen. | unresolved | merge conflicts | scope violations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["summary"]:
        lines.append(
            f"| {_cells(row)} | {_fmt(row['mean_checkpoint_count'], False)} | "
            f"{_fmt(row['mean_drs_penalized'], False, NA)} | {_fmt(row['mean_dre'], missing=NA)} | "
            f"{_fmt(row['mean_cail_penalized'], False, NA)} | {_fmt(row['mean_unresolved_dependencies'], False, NA)} | "
            f"{_rate(row, 'merge_conflict_rate')} | {_rate(row, 'scope_violation_rate')} |"
        )
    self_reported = sum(row.get("self_reported_timelines", 0) for row in report["summary"])
    if self_reported:
        lines += ["", f"{self_reported} prediction(s) bring a self-reported timeline (their own checkpoints, not tied "
                      "to a recorded run by the agent runner's hash chain): their DRS, DRE, CAIL and SAD proxy are the "
                      "submitter's account, flagged `timeline self-reported` in their rows."]
    lines += usage_table(report["summary"])
    lines += ["", "## Predictions", "",
              "| line | model | protocol | task | outcome | passed | pass rate | ADPR | flags |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in report["predictions"]:
        if p["status"] != "evaluated":
            error = p["infrastructure_error"]
            lines.append(f"| {p['line']} | {_cells(p, task=True)} | "
                         f"infrastructure: {markdown_cell(error['kind'])} | | | | |")
            continue
        adpr = NA if p["adpr_numerator"] is None else f"{p['adpr_numerator']}/{p['adpr_denominator']}"
        lines.append(
            f"| {p['line']} | {_cells(p, task=True)} | {markdown_cell(p['outcome'])} | "
            f"{p['tests_passed']}/{p['tests_denominator']} | {_fmt(p['pass_rate'])} | {adpr} | "
            f"{_flags(p)} |"
        )
    lines += review_sections(report["predictions"])
    lines += build_table(report["predictions"])
    lines += trace_tables(report["predictions"], plot)
    if report["line_problems"]:
        lines += ["", "## Skipped lines", ""] + [
            f"- line {p['line']} ({markdown_text(p['kind'])}): {markdown_text(p['message'])}"
            for p in report["line_problems"]]
    infra = [p for p in report["predictions"] if p["status"] != "evaluated"]
    if infra:
        lines += ["", "## Infrastructure errors (not scored; fix and rerun the same run id)", ""] + [
            f"- line {p['line']} {markdown_text(p['task_id'])}: "
            f"{markdown_text(p['infrastructure_error']['message'][:500])}" for p in infra]
    lines += ["", "## Notes", ""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def _reachable(row: dict[str, Any]) -> str:
    """`n` tasks that can reach final success, with `(+u unmeasured)` when some were not measured."""
    reachable, unmeasured = row.get("reachable_tasks"), row.get("unmeasured_tasks") or 0
    if reachable is None:
        return NA
    return f"{reachable}" + (f" (+{unmeasured} unmeasured)" if unmeasured else "")


def dataset_source(dataset: dict[str, Any]) -> str:
    """Where the rows came from, named as it is: a Hub id, its revision and the commit it resolved to; or a local
    folder and the content digest of its Parquet files."""
    if dataset.get("source") == "local_folder":
        return (f"Dataset: local folder `{dataset['id']}` (content digest of its Parquet files "
                f"`{dataset['content_sha256']}`)")
    commit = dataset.get("resolved_commit")
    resolved = f"resolved commit `{commit}`" if commit else "resolved commit unknown (offline: read from the cache)"
    return f"Dataset: Hub `{dataset['id']}` at revision `{dataset['revision']}` ({resolved})"


def trace_tables(predictions: list[dict[str, Any]], plot: str | None = None) -> list[str]:
    """Per prediction with more than one checkpoint: which probe groups of each dependency passed at each step.

    Cells list the passing groups (U upstream, D downstream, I integrated); agent-workspace steps are marked `*`
    because they never count for DRS.
    """
    lines: list[str] = []
    for p in predictions:
        trace = p.get("dependency_trace") or {}
        steps: list[dict[str, Any]] = next(iter(trace.values()), [])
        if len(steps) < 2:
            continue
        if not lines:
            lines += ["", "## Dependency traces", ""]
            if plot:
                lines += [f"![Integrated dependency probes passing, by checkpoint step]({plot})", ""]
            lines += ["Passing probe groups per step: U upstream, D downstream, I integrated; * agent workspace.", ""]
        header = [f"{s['step']}{'*' if s['workspace_kind'] == 'agent_workspace' else ''} {_step_label(s)}"
                  for s in steps]
        lines += [f"**line {p['line']}: {_names(p)}**", "",
                  "| dependency | " + " | ".join(map(markdown_cell, header)) + " |", "|---|" + "---|" * len(steps)]
        for dep_id, dep_steps in trace.items():
            cells = ["".join(letter for group, letter in (("upstream", "U"), ("downstream", "D"), ("integrated", "I"))
                             if step[group]) or "-" for step in dep_steps]
            lines.append(f"| {markdown_cell(dep_id)} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _step_label(step: dict[str, Any]) -> str:
    short = {"agent_artifact": "artifact", "integration_after_merge": "merge", "final_integrated": "final"}
    label = short.get(step["checkpoint_type"], step["checkpoint_type"])
    return f"{label} {step['agent_id']}" if step["agent_id"] else label


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
        flat.append({key: csv_cell(value) for key, value in out.items()})
    buffer = io.StringIO()
    if flat:
        writer = csv.DictWriter(buffer, fieldnames=list(dict.fromkeys(k for row in flat for k in row)))
        writer.writeheader()
        writer.writerows(flat)
    return buffer.getvalue()
