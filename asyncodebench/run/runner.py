"""Evaluate a predictions file against the published rows: resumable, parallel, infrastructure kept apart.

One way for data to flow: rows -> task specs; predictions file -> valid predictions (+ line problems); each
prediction -> container -> evidence -> result, all saved under the run folder; the results -> the run report.
"""

from __future__ import annotations

import datetime as dt
import platform
import shutil
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from asyncodebench import __version__
from asyncodebench.dataset.rows import load_published
from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.evaluation import Settings
from asyncodebench.harness.overlays import OverlayError
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images import image_map
from asyncodebench.run import baselines, sessions, store
from asyncodebench.run.config import RunConfig, RunState
from asyncodebench.run.executors import Executor, open_executor
from asyncodebench.run.prediction_result import PredictionResult
from asyncodebench.run.predictions import read_predictions
from asyncodebench.run.results import infrastructure_result, invalid_run_result, score
from asyncodebench.run.runfolder import (
    SettingsChangedError,
    differences,
    prediction_folder,
    read_settings,
    result_files,
    settings_record,
    write_settings,
)
from asyncodebench.run.work import Job, Outcome
from asyncodebench.scoring.patches import patch_bytes


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def prepare_run(config: RunConfig) -> RunState:
    """Load rows and predictions; report bad lines; nothing runs yet."""
    published = load_published(config.dataset, config.revision)
    specs = {t["task_id"]: TaskSpec.from_rows(t, published.rows.dependencies) for t in published.rows.tasks}
    mapped = image_map.load(config.images) if config.images else {}
    if mapped and config.images:
        specs = image_map.apply(specs, mapped, config.images)
    unknown = [t for t in config.tasks if t not in specs]
    if unknown:
        raise ValueError(f"--tasks names unknown task(s) {unknown}; the dataset has {sorted(specs)}")
    if config.tasks:
        specs = {t: s for t, s in specs.items() if t in config.tasks}
    agents = {t: {a.agent_id for a in s.specialists} for t, s in specs.items()}
    file = read_predictions(config.predictions, agents, config.default_protocol)
    return RunState(published, specs, file, {}, _now(), mapped_images=mapped)


def rescore_problem(config: RunConfig, state: RunState) -> str | None:
    """Why `--rescore` has nothing to regrade in this run folder, or None when some prediction has saved evidence."""
    if not config.run_dir.is_dir():
        return (f"--rescore: there is no run folder {config.run_dir}; evaluate the predictions first (the same command "
                "without --rescore), or give the --run-id and --output-dir of an earlier run")
    folders = [prediction_folder(config.run_dir, p) for p in state.file.predictions]
    if not any((f / store.EXECUTION).exists() for f in folders):
        return (f"--rescore: the run folder {config.run_dir} holds no evaluated prediction of {config.predictions}; "
                "evaluate them first (the same command without --rescore)")
    return None


def claim_settings(config: RunConfig, state: RunState) -> RunConfig:
    """Check the run folder's recorded settings against these (the caller holds the run lock); return the config to
    run with.

    A first start records the settings in `settings.json`. A later start with other dataset, probes, timeouts or
    limits is refused (its results would mix settings while the report claims one set), unless `--force`, which
    drops every earlier result and base-state measurement and records the new settings. `--rescore` regrades with
    the recorded settings (it runs nothing), refusing only another dataset.

    Raises:
        SettingsChangedError: the settings differ; the message names each difference and how to proceed.
    """
    current = settings_record(state.published, config.settings,
                              {t: e["pinned_ref"] for t, e in sorted(state.mapped_images.items())})
    recorded = read_settings(config.run_dir)
    if recorded is None:
        if not config.rescore:
            write_settings(config.run_dir, current)
        return config
    changed = differences(recorded, current, include_evaluation=not config.rescore)
    if changed and not config.rescore and not _has_results(config.run_dir):
        changed = []  # nothing was made under the old settings (say, every prediction met a stopped daemon)
    if config.rescore:
        if changed:
            raise SettingsChangedError(
                f"--rescore: the results in {config.run_dir} were made with another dataset ({'; '.join(changed)}); "
                "rescore with that dataset, or evaluate with this one under a new --run-id")
        return replace(config, settings=Settings.from_record(recorded))
    if changed and not config.force:
        raise SettingsChangedError(
            f"the run folder {config.run_dir} holds results made with other settings, which this run would mix with "
            "new ones: " + "; ".join(changed) + ". Rerun with the original settings to resume, choose a new "
            "--run-id, or add --force to re-evaluate everything with the new settings")
    if changed:  # --force: nothing made under the old settings may count as finished or as a floor
        for result in result_files(config.run_dir):
            result.unlink()
        shutil.rmtree(config.run_dir / "baselines", ignore_errors=True)
        sessions.forget(config.run_dir)
    write_settings(config.run_dir, current)
    return config


def begin_session(config: RunConfig, state: RunState) -> None:
    """Record this start in the run folder (the caller holds the run lock), so the report covers every session."""
    sessions.begin(config.run_dir, state.started_at, "rescore" if config.rescore else "evaluate")


def end_session(config: RunConfig, state: RunState, ended: str) -> list[sessions.Session]:
    """Complete this session's record (`ended`: "finished" or "interrupted"); every session of the run."""
    return sessions.end(config.run_dir, _now(), ended, state.evaluated_now)


def _has_results(run_dir: Path) -> bool:
    """Whether anything in the run folder was made under its recorded settings: a scored result or a base state."""
    return any(store.is_finished(f.parent) for f in result_files(run_dir)) or \
        any(run_dir.glob("baselines/*.json"))


def run(config: RunConfig, state: RunState, progress: Any = None) -> list[PredictionResult]:
    """Evaluate (or rescore) every valid prediction; return the results in file order."""
    folders = {p.line: prediction_folder(config.run_dir, p) for p in state.file.predictions}
    for prediction in state.file.predictions:
        store.write_atomic(folders[prediction.line] / store.PATCH, patch_bytes(prediction.model_patch))
    if config.rescore:
        _rescore(config, state, folders)
    else:
        _evaluate_all(config, state, folders, progress)
    for task_id in state.specs:  # measured by this run or an earlier, interrupted one
        if task_id not in state.baselines and (found := baselines.read(config.run_dir, task_id)) is not None:
            state.baselines[task_id] = found
    return store.read_results(folders[p.line] for p in state.file.predictions)


def _rescore(config: RunConfig, state: RunState, folders: dict[int, Path]) -> None:
    for prediction in state.file.predictions:
        folder = folders[prediction.line]
        if (folder / store.EXECUTION).exists():
            spec = state.specs[prediction.task_id]
            floor = baselines.load(config.run_dir, spec)
            result = score(spec, prediction, store.load_evidence(folder), floor, probes_ran=config.settings.run_probes)
            store.write_result(folder, result)


def _evaluate_all(config: RunConfig, state: RunState, folders: dict[int, Path], progress: Any) -> None:
    pending = [p for p in state.file.predictions if config.force or not store.is_finished(folders[p.line])]
    invalid = {p.line: result for p in pending if (result := invalid_run_result(p)) is not None}
    for line, result in invalid.items():  # lines the agent runner marked invalid: never evaluated, never scored
        store.write_result(folders[line], result)
        state.evaluated_now += 1
        if progress is not None:
            progress.update(1)
    pending = [p for p in pending if p.line not in invalid]
    state.skipped_finished = len(state.file.predictions) - len(pending)
    if progress is not None:
        progress.update(state.skipped_finished)  # finished in an earlier, interrupted run of this id
    if not pending and config.executor == "local":
        return  # (a Ray run still visits its nodes: resuming cleans what a dead node left there)
    task_ids = {p.task_id for p in pending}
    executor = open_executor(config, state)
    problem = executor.open(task_ids)
    if problem is not None:
        for prediction in pending:
            store.write_result(folders[prediction.line], infrastructure_result(prediction, *problem))
        return
    overlays = {task_id: load_overlays(config, state.specs[task_id]) for task_id in task_ids}
    try:
        _measure_baselines(executor, config, state, overlays)
        jobs = [Job(state.specs[p.task_id], p, config.settings, overlays[p.task_id],
                    state.baselines.get(p.task_id), config.label) for p in pending]

        def record(job: Job, outcome: Outcome) -> None:  # the driver writes, whichever executor evaluated
            store.save_outcome(folders[job.prediction.line], outcome.result, outcome.evidence)
            state.evaluated_now += 1
            if progress is not None:
                progress.update(1)

        executor.evaluate(jobs, record)
    finally:
        executor.close()


def _measure_baselines(executor: Executor, config: RunConfig, state: RunState,
                       overlays: dict[str, dict[str, bytes] | str]) -> None:
    """The base state of every task about to be evaluated whose overlays are usable (decision 9): read when this
    run already measured it on the same image, else measured by the executor and recorded here."""
    wanted = {}
    for task_id, task_overlays in sorted(overlays.items()):
        if isinstance(task_overlays, str):
            continue
        earlier = baselines.recorded(config.run_dir, state.specs[task_id])
        if earlier is None:
            wanted[task_id] = task_overlays
        else:
            state.baselines[task_id] = earlier
    for task_id, measured in executor.measure_baselines(wanted).items():
        if isinstance(measured, BaseStateRecord):
            baselines.save(config.run_dir, measured)
        state.baselines[task_id] = measured


def load_overlays(config: RunConfig, spec: TaskSpec) -> dict[str, bytes] | str:
    """The task's overlay patches by path, each verified by sha256, or what is wrong with them (one message)."""
    try:
        return config.overlay_source.load(spec.overlays)
    except OverlayError as exc:
        return f"{spec.task_id}: {exc}"


def run_metadata(config: RunConfig, state: RunState, runs: list[sessions.Session]) -> dict[str, Any]:
    """Who ran what against which data: enough to reproduce or audit the run. `runs`: every session of the run
    folder (`end_session`), so a resumed run's report starts at its first start."""
    return {
        "run_id": config.run_id,
        "run_folder": str(config.run_dir.resolve()),
        "container_label": config.label,
        "tool": {"name": "asyncodebench", "version": __version__, "python": platform.python_version()},
        "dataset": state.published.describe(),
        "predictions_file": {"path": state.file.path, "sha256": state.file.sha256},
        "overlays": config.overlay_source.describe(),
        "settings": {**config.settings.to_record(),
                     "max_workers": config.max_workers or (1 if config.executor == "local" else None),
                     "default_protocol": config.default_protocol, "tasks": list(config.tasks),
                     "mode": "rescore" if config.rescore else "evaluate"},
        "images": {t: s.as_dict() for t, s in sorted(state.images.items())},
        "image_sources": image_map.describe(state.specs, state.mapped_images),
        "baselines": {t: _baseline_summary(b) for t, b in sorted(state.baselines.items())},
        "work": {"evaluated_now": state.evaluated_now, "already_finished": state.skipped_finished},
        "started_at": runs[0].started_at if runs else state.started_at,  # the first session's start
        "finished_at": _now(),
        "sessions": [asdict(s) for s in runs],
        "command": " ".join(sys.argv),
    }


def _baseline_summary(record: BaseStateRecord | str) -> dict[str, Any]:
    """A task's base-state run as the report shows it: its counts and any image problem it reveals."""
    if isinstance(record, str):
        return {"counts": None, "matches_recorded": None, "problem": record}
    return {"counts": None if record.counts is None else dict(record.counts),
            "matches_recorded": record.matches_recorded, "problem": record.problem()}
