"""Paired comparisons between (model, protocol) cells of one or more runs, over the tasks both cells scored.

A cell's value on a task is the mean of its evaluated predictions of that task (repeated runs averaged, as in the
report); infrastructure errors and unmeasured metrics (null) give no value, so that task is not paired. Three views:

- protocols: for each model, each protocol against `single`;
- models: for each protocol, each pair of different models;
- runs: the same (model, protocol) cell in a later run against the first run that has it.

Each comparison gives, per metric, the mean of the per-task differences (b - a) with a paired bootstrap interval and
the sign and Wilcoxon signed-rank tests (`reports.paired`), with the number of tasks paired and a reading: "b better"
or "b worse" only when `paired.reading` allows it. DRS and CAIL count checkpoint steps, and a run's checkpoint count
T depends on its protocol, so they pair a task only when both cells had the same T on it. Runs made on different
dataset revisions are not comparable task by task; `check_datasets` says so and the caller refuses them unless told.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from statistics import fmean
from typing import Any

from asyncodebench.dataset.validation import validator
from asyncodebench.reports.paired import ALPHA, MIN_TASKS_FOR_LABEL, paired, reading
from asyncodebench.reports.report import REPORT_SCHEMA_VERSION as REPORT_SCHEMA
from asyncodebench.scoring.bootstrap import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from asyncodebench.untrusted import csv_cell

COMPARE_SCHEMA_VERSION = "2.1"  # 2.0: readings, T-matched DRS and CAIL, no interval from one task, notes;
# 2.1: kit_check
BASELINE_PROTOCOL = "single"
# name -> (per-prediction field of report.json, True when higher is better, unit shown)
METRICS = {
    "fsr": ("final_success", True, "share"),
    "pass_rate": ("pass_rate", True, "share"),
    "adpr": ("adpr", True, "share"),
    "drs_penalized": ("drs_penalized_mean", False, "steps"),
    "dre": ("dre_mean", True, "share"),
    "cail_penalized": ("cail_penalized_mean", False, "steps"),
}
T_DIFFERS = "T differs: not compared"  # the reading of a step metric whose every shared task had another T
METRICS_DOC = "docs/METRICS.md"  # the kit's copy of the metrics document, which the notes link to
NOTES = (
    ("A comparison is labelled 'b better' or 'b worse' only when at least "
     f"{MIN_TASKS_FOR_LABEL} tasks are paired, the 95% interval of the mean difference excludes 0, and both the "
     f"sign test and the signed-rank test give p <= {ALPHA}, all pointing the same way. {MIN_TASKS_FOR_LABEL} is "
     "the least that can work: with n tasks the smallest two-sided p of either exact test is 2 / 2^n, 0.0625 with "
     "5 tasks and 0.031 with 6. One task reads 'one task: no inference' and has no interval (resampling one task "
     f"always gives that task back); 2 to {MIN_TASKS_FOR_LABEL - 1} tasks read 'too few tasks: no inference'. The "
     "task is the unit: each weighs the same, and the interval resamples tasks.",
     f"{METRICS_DOC}#decisions-for-this-project"),
    ("DRS and CAIL are counted in checkpoint steps, and a run's number of checkpoints T depends on its protocol "
     "(1 for single, 2n + 1 for n specialists in one round) while an unresolved dependency costs T + 1 steps. A "
     "task's DRS or CAIL is therefore paired only when both cells had the same T on it; the others are counted in "
     "tasks_t_differs and left out, and a comparison with none left reads 'T differs: not compared'. Compare "
     "protocols on DRE, which scales the step by T.",
     f"{METRICS_DOC}#5-drs-dependency-resolution-step-dre-and-the-penalty"),
    (f"The labels are not corrected for the number of comparisons on the page: at the {ALPHA} level up to one "
     "comparison in twenty with no real difference behind it can still be labelled. Read the intervals first.",
     f"{METRICS_DOC}#decisions-for-this-project"),
)


@dataclass(frozen=True)
class Run:
    """One run's report as compared, with the label tables give it."""

    label: str  # how tables name the run: its run id, or its folder when two runs share an id
    path: str  # the report.json read
    report: dict[str, Any]


@dataclass(frozen=True)
class Cell:
    """One (model, protocol) cell of one run: what a comparison pairs, task by task."""

    run: str  # the run's label
    model: str
    protocol: str
    subject: str  # the model as tables name it: with "@ run" when the same model is in several runs


def load_run(path: Path) -> Run:
    """A run folder or a report.json, checked against schemas/report.schema.json: a report of another shape (an
    older kit's under the same schema version, or no report at all) is refused rather than half read. Raises OSError
    or ValueError when it cannot be read as a report."""
    source = path / "report.json" if path.is_dir() else path
    report = json.loads(source.read_text(encoding="utf-8"))
    if not isinstance(report, dict) or not {"run", "predictions"} <= report.keys():
        raise ValueError(f"{source} is not a run report (no run or predictions)")
    problem = next(iter(sorted(validator("report").iter_errors(report), key=lambda e: list(e.absolute_path))), None)
    if problem is not None:
        where = "/".join(str(p) for p in problem.absolute_path) or "(top)"
        raise ValueError(f"{source} is not a run report of this kit's format (schema version {REPORT_SCHEMA}) at "
                         f"{where}: {problem.message[:200]}; rewrite it with this kit: python scripts/evaluate.py "
                         "PREDICTIONS --run-id <its run id> --rescore")
    return Run(label=report["run"]["run_id"], path=str(source), report=report)


def label_runs(runs: list[Run]) -> list[Run]:
    """Runs sharing a run id are named by their report's path instead."""
    ids = [r.label for r in runs]
    return [r if ids.count(r.label) == 1 else Run(r.path, r.path, r.report) for r in runs]


def dataset_identity(report: dict[str, Any]) -> str:
    """What must match for two runs to be paired task by task: the Hub dataset at its resolved commit (the
    revision when the commit is unknown), or the content digest of a local folder's Parquet files."""
    dataset = report["run"]["dataset"]
    if dataset.get("source") == "local_folder":
        return f"local folder with content {dataset.get('content_sha256')}"
    revision = dataset.get("resolved_commit") or f"revision {dataset.get('revision')}"
    return f"{dataset.get('id')} at {revision}"


def check_datasets(runs: list[Run], allow_mixed: bool) -> dict[str, Any]:
    """Whether every run used the same dataset; the message names each run's when they differ."""
    identities = {run.label: dataset_identity(run.report) for run in runs}
    return _one_for_all(identities, "identities", allow_mixed, "All runs used the same dataset",
                        "The runs used different datasets",
                        "Compared anyway (--allow-different-datasets): a task may not be the same task in both runs.",
                        "Refused: rerun on one revision, or pass --allow-different-datasets.")


def check_versions(runs: list[Run], allow_mixed: bool) -> dict[str, Any]:
    """Whether every run was made by one kit version with one report schema: another kit may grade or count
    differently, so its numbers are compared only when asked (`allow_mixed`), and the outputs say so."""
    versions = {run.label: f"kit {run.report['run']['tool']['version']}, "
                           f"report schema {run.report.get('schema_version')}" for run in runs}
    return _one_for_all(versions, "versions", allow_mixed, "All runs were made by the same kit",
                        "The runs were made by different kits or report schemas",
                        "Compared anyway (--allow-mixed): a difference may come from the kit, not the model.",
                        "Refused: rescore the runs with one kit (python scripts/evaluate.py PREDICTIONS --run-id "
                        "<run id> --rescore), or pass --allow-mixed.")


def _one_for_all(values: dict[str, str], key: str, allow_mixed: bool, same_text: str, differ_text: str,
                 allowed_text: str, refused_text: str) -> dict[str, Any]:
    """A consistency check over one value per run: consistent when all runs share it, else the message lists each
    run's and says whether the comparison went on (`allow_mixed`)."""
    same = len(set(values.values())) <= 1
    if same:
        message = f"{same_text}: {next(iter(values.values()), 'none')}."
    else:
        listed = "; ".join(f"{label}: {value}" for label, value in values.items())
        message = f"{differ_text} ({listed}). " + (allowed_text if allow_mixed else refused_text)
    return {"consistent": same, "allowed_mixed": bool(allow_mixed and not same), key: values, "message": message}


def task_values(runs: list[Run]) -> dict[Cell, dict[str, dict[str, float]]]:
    """Per cell, per metric, per task: the mean over the cell's evaluated predictions of that task."""
    owners: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        for p in run.report["predictions"]:
            owners[p["model_name_or_path"]].add(run.label)
    raw: dict[Cell, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for run in runs:
        for p in run.report["predictions"]:
            model = p["model_name_or_path"]
            subject = model if len(owners[model]) == 1 else f"{model} @ {run.label}"
            cell = Cell(run.label, model, p["protocol"], subject)
            raw[cell]  # a cell whose predictions all hit infrastructure errors still appears, with no tasks
            if p["status"] != "evaluated":
                continue
            for name, (field, _, _) in METRICS.items():
                if p.get(field) is not None:
                    raw[cell][name][p["task_id"]].append(float(p[field]))
    return {cell: {name: {task: fmean(v) for task, v in tasks.items()} for name, tasks in metrics.items()}
            for cell, metrics in raw.items()}


def checkpoint_counts(runs: list[Run]) -> dict[tuple[str, str, str], dict[str, int | None]]:
    """Per (run label, model, protocol), per task: the checkpoint count T of its evaluated predictions, None when
    unknown or when its repeated predictions disagree (their averaged steps then mix scales)."""
    seen: dict[tuple[str, str, str], dict[str, set[int | None]]] = defaultdict(lambda: defaultdict(set))
    for run in runs:
        for p in run.report["predictions"]:
            if p["status"] == "evaluated":
                key = (run.label, p["model_name_or_path"], p["protocol"])
                seen[key][p["task_id"]].add(p.get("checkpoint_count"))
    return {key: {task: next(iter(ts)) if len(ts) == 1 else None for task, ts in tasks.items()}
            for key, tasks in seen.items()}


def compare_cells(a: Cell, b: Cell, values: dict[Cell, dict[str, dict[str, float]]], view: str,
                  counts: dict[tuple[str, str, str], dict[str, int | None]]) -> list[dict]:
    """One record per metric: b against a over the tasks both scored (for steps, both with the same known T)."""
    ta, tb = (counts.get((c.run, c.model, c.protocol), {}) for c in (a, b))
    records = []
    for name, (_, higher_is_better, unit) in METRICS.items():
        va, vb = values[a].get(name, {}), values[b].get(name, {})
        shared = sorted(va.keys() & vb.keys())
        if unit == "steps":
            matched = [t for t in shared if ta.get(t) is not None and ta.get(t) == tb.get(t)]
            t_differs, shared = len(shared) - len(matched), matched
        else:
            t_differs = 0
        result = paired([vb[t] - va[t] for t in shared])
        records.append({
            "view": view, "metric": name, "unit": unit, "higher_is_better": higher_is_better,
            "a": asdict(a), "b": asdict(b),
            "mean_a": fmean(va[t] for t in shared) if shared else None,
            "mean_b": fmean(vb[t] for t in shared) if shared else None,
            "tasks_only_a": len(va.keys() - vb.keys()), "tasks_only_b": len(vb.keys() - va.keys()),
            "tasks_t_differs": t_differs,
            **asdict(result),
            "reading": T_DIFFERS if t_differs and not shared else reading(result, higher_is_better),
        })
    return records


def comparisons(values: dict[Cell, dict[str, dict[str, float]]],
                counts: dict[tuple[str, str, str], dict[str, int | None]]) -> list[dict[str, Any]]:
    """Every comparison record of the three views: protocols against `single`, models under one protocol, and a
    cell in a later run against the first run that has it."""
    cells = sorted(values, key=lambda c: (c.subject, c.protocol))
    records: list[dict[str, Any]] = []
    by_subject: dict[str, dict[str, Cell]] = defaultdict(dict)
    for cell in cells:
        by_subject[cell.subject][cell.protocol] = cell
    for subject, protocols in by_subject.items():
        if BASELINE_PROTOCOL in protocols:
            for protocol, cell in protocols.items():
                if protocol != BASELINE_PROTOCOL:
                    records += compare_cells(protocols[BASELINE_PROTOCOL], cell, values, "protocols", counts)
    by_protocol: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_protocol[cell.protocol].append(cell)
    for protocol, members in sorted(by_protocol.items()):
        for a, b in combinations(members, 2):
            if a.model != b.model:  # the same model in two runs is the runs view's
                records += compare_cells(a, b, values, "models", counts)
    by_key: dict[tuple[str, str], list[Cell]] = defaultdict(list)
    for cell in values:  # in the order the runs were given
        by_key[(cell.model, cell.protocol)].append(cell)
    for members in by_key.values():
        for later in members[1:]:
            records += compare_cells(members[0], later, values, "runs", counts)
    return records


def cell_rows(values: dict[Cell, dict[str, dict[str, float]]]) -> list[dict[str, Any]]:
    """Each cell with the tasks it scored and its mean per metric over them (its own tasks, not paired)."""
    rows = []
    for cell in sorted(values, key=lambda c: (c.subject, c.protocol)):
        metrics = values[cell]
        rows.append({**asdict(cell), "tasks": len(metrics.get("pass_rate", {})),
                     **{name: fmean(metrics[name].values()) if metrics.get(name) else None for name in METRICS}})
    return rows


def compare_runs(runs: list[Run], allow_mixed: bool = False, allow_mixed_kits: bool = False) -> dict[str, Any]:
    """The whole comparison record (compare.json, checked against schemas/compare.schema.json). Raises ValueError,
    with the check's message, when the runs used different datasets and `allow_mixed` is false, or were made by
    different kit versions or report schemas and `allow_mixed_kits` is false."""
    runs = label_runs(runs)
    check = check_datasets(runs, allow_mixed)
    if not check["consistent"] and not allow_mixed:
        raise ValueError(check["message"])
    kits = check_versions(runs, allow_mixed_kits)
    if not kits["consistent"] and not allow_mixed_kits:
        raise ValueError(kits["message"])
    values = task_values(runs)
    counts = checkpoint_counts(runs)
    record = {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "runs": [{"label": r.label, "report": r.path, "run_id": r.report["run"]["run_id"],
                  "dataset": r.report["run"]["dataset"], "tool_version": r.report["run"]["tool"]["version"],
                  "predictions": len(r.report["predictions"])} for r in runs],
        "dataset_check": check,
        "kit_check": kits,
        "method": {"difference": "b - a, per task, over the tasks both cells scored",
                   "interval": f"95% percentile bootstrap of the mean difference, {BOOTSTRAP_RESAMPLES} resamples "
                               f"of tasks, seed {BOOTSTRAP_SEED}; none from a single task",
                   "tests": "two-sided exact sign test and Wilcoxon signed-rank test (average ranks for ties, "
                            "exact permutation distribution up to 50 tasks); zero differences are left out of both",
                   "reading": f"'b better' or 'b worse' only with at least {MIN_TASKS_FOR_LABEL} tasks paired, the "
                              f"interval excluding 0 and both p-values at most {ALPHA}, all the same way; DRS and "
                              "CAIL pair only tasks where both cells had the same checkpoint count T",
                   "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "alpha": ALPHA,
                   "min_tasks_for_label": MIN_TASKS_FOR_LABEL},
        "notes": [{"text": text, "link": link} for text, link in NOTES],
        "metrics": {name: {"field": field, "higher_is_better": better, "unit": unit}
                    for name, (field, better, unit) in METRICS.items()},
        "cells": cell_rows(values),
        "comparisons": comparisons(values, counts),
    }
    validator("compare").validate(record)  # a failure here is a bug of this module, not of the runs
    return record


def csv_text(record: dict[str, Any]) -> str:
    """compare.csv: one line per comparison and metric, cells spelled out in columns."""
    buffer = io.StringIO()
    rows = [{key: csv_cell(value) for key, value in {  # model names and run labels are the runs' own text
                "view": c["view"], "metric": c["metric"],
                **{f"a_{k}": c["a"][k] for k in ("run", "model", "protocol")},
                **{f"b_{k}": c["b"][k] for k in ("run", "model", "protocol")},
                **{k: v for k, v in c.items() if k not in ("view", "metric", "a", "b")}}.items()}
            for c in record["comparisons"]]
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()
