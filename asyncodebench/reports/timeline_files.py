"""The files a timeline is drawn from, read with bounds: a prediction's folder (result.json, its checkpoint records),
its line of the predictions file, and the agents' trajectories the line names.

Every file is untrusted and may be huge or broken: a trajectory is read up to TRAJECTORY_BYTES and
TRAJECTORY_LINES (what is left out is said), a line that is not a JSON object is skipped and counted, and a path
is followed only when it is relative and stays below the folder it is relative to. Links to trajectories are
relative to the page and pass `untrusted.page_link`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from asyncodebench.reports.flags import row_flags
from asyncodebench.reports.htmltimeline import write_timeline_html
from asyncodebench.reports.timeline import Sources, build_timeline
from asyncodebench.untrusted import page_link

TRAJECTORY_BYTES = 64 * 1024 * 1024  # of one trajectory file read
TRAJECTORY_LINES = 5_000  # of one trajectory file's lines shown
PAGE = "timeline.html"
TRAJECTORIES_LISTED = 64  # of a line's trajectories read (as the report links them)


def read_json_lines(path: Path, max_bytes: int = TRAJECTORY_BYTES,
                    max_lines: int = TRAJECTORY_LINES) -> tuple[list[Mapping[str, Any]], str | None]:
    """The JSON objects of a JSONL file, and what was left out (None: nothing)."""
    out: list[Mapping[str, Any]] = []
    skipped, read, more = 0, 0, False
    with path.open("rb") as handle:
        for raw in handle:
            read += len(raw)
            if read > max_bytes or len(out) >= max_lines:
                more = True
                break
            try:
                value = json.loads(raw.decode("utf-8", errors="replace"))
            except ValueError:
                skipped += 1
                continue
            if isinstance(value, Mapping):
                out.append(value)
            else:
                skipped += 1
    problems = []
    if more:
        problems.append(f"only the first {len(out)} lines are shown (the file is longer)")
    if skipped:
        problems.append(f"{skipped} line(s) that are not JSON objects left out")
    return out, "; ".join(problems) or None


def _below(base: Path, name: Any) -> Path | None:
    """`base / name` when `name` is a relative path that stays below `base` and is a file there."""
    if not isinstance(name, str) or not name or "\x00" in name:
        return None
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        return None
    target = base / path
    try:
        return target if target.resolve().is_relative_to(base.resolve()) and target.is_file() else None
    except OSError:
        return None


def _made_by(agents_run: Path, line: Mapping[str, Any]) -> bool:
    """Whether an agents' run folder made this line: its scenario folder (`runner.folder`) keeps the same runner
    record (two runs of one scenario have folders of the same name, and only their records tell them apart)."""
    runner = line.get("runner")
    folder = _below(agents_run, f"{runner.get('folder')}/prediction.json") if isinstance(runner, Mapping) else None
    if folder is None and isinstance(runner, Mapping):
        folder = _below(agents_run, f"{runner.get('folder')}/invalid.json")
    if folder is None:
        return False
    try:
        kept = json.loads(folder.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(kept, Mapping) and kept.get("runner") == runner


def trajectories(line: Mapping[str, Any], predictions_dir: Path | None, agents_runs: Iterable[Path],
                 page_dir: Path, run_dir: Path) -> tuple[list[tuple[str, str | None, list[Mapping[str, Any]],
                                                                str | None]], list[str]]:
    """The trajectories a line names, read (relative to its predictions file, else to each agents' run folder
    given), with a link from the page; and the names that were found nowhere."""
    names = line.get("trajectories")
    found, lost = [], []
    bases = ([predictions_dir] if predictions_dir else []) + [run for run in agents_runs if _made_by(run, line)]
    for name in (names if isinstance(names, list) else [])[:TRAJECTORIES_LISTED]:
        path = next((p for base in bases if (p := _below(base, name))), None)
        label = PurePosixPath(str(name)).stem
        if path is None:
            lost.append(str(name))
            continue
        try:
            lines, problem = read_json_lines(path)
        except OSError as exc:
            lines, problem = [], f"not read ({type(exc).__name__})"
        # the page's link climbs from its folder to the run folder's (the kit's own path), then names the file
        climb = Path(os.path.relpath(run_dir.resolve(), page_dir.resolve())).as_posix()
        relative = Path(os.path.relpath(path.resolve(), run_dir.resolve())).as_posix()
        href = page_link(relative, "" if climb == "." else climb + "/", climb=True)
        found.append((label, href, lines, problem))
    return found, lost


def predictions_line(path: Path | None, number: Any) -> Mapping[str, Any] | None:
    """Line `number` (1-based) of a predictions file as a JSON object; None when it cannot be read."""
    if path is None or not isinstance(number, int) or number < 1:
        return None
    try:
        with path.open("rb") as handle:
            for k, raw in enumerate(handle, start=1):
                if k == number:
                    value = json.loads(raw.decode("utf-8", errors="replace"))
                    return value if isinstance(value, Mapping) else None
    except (OSError, ValueError):
        return None
    return None


def prediction_sources(folder: Path, run_dir: Path, line: Mapping[str, Any] | None, predictions_dir: Path | None,
                       agents_runs: Iterable[Path] = (), row: Mapping[str, Any] | None = None) -> Sources:
    """Everything one prediction's timeline reads; `row` is its report.json row (for its flags)."""
    notes = []
    result = None
    try:
        loaded = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        result = loaded if isinstance(loaded, Mapping) else None
    except (OSError, ValueError):
        notes.append("no readable result.json: no verdict and no DRS or CAIL numbers")
    records: list[Mapping[str, Any]] = []
    checkpoint_file = folder / "dependency_probe_checkpoints.jsonl"
    if checkpoint_file.is_file():
        records, problem = read_json_lines(checkpoint_file)
        if problem:
            notes.append(f"dependency_probe_checkpoints.jsonl: {problem}")
    found, lost = trajectories(line or {}, predictions_dir, agents_runs, folder, run_dir)
    if lost:
        notes.append(f"{len(lost)} trajectory file(s) the line names were not found beside its predictions file "
                     "(a file copied or concatenated away from its run folder): give the agents' run folder "
                     "with scripts/show_run.py --agents-run")
    if line is None:
        notes.append("the prediction's line was not read: no runner record")
    links = [(text, href) for text, name in (("result", "result.json"), ("checkpoints", checkpoint_file.name),
                                             ("patch", "patch.diff")) if (folder / name).is_file()
             and (href := page_link(name))]
    flags = [flag.label for flag in row_flags(dict(row))] if row else []
    return Sources(result, records, line, found, flags, links, tuple(notes))


def result_folders(run_dir: Path) -> dict[int, Path]:
    """The prediction folders of a run folder by the predictions-file line their result.json names."""
    found = {}
    for result in sorted((run_dir / "predictions").glob("*/result.json")):
        try:
            line = json.loads(result.read_text(encoding="utf-8")).get("line")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(line, int):
            found[line] = result.parent
    return found


def write_run_timelines(run_dir: Path, report: Mapping[str, Any], agents_runs: Iterable[Path] = (),
                        only: str | None = None) -> list[Path]:
    """Write `timeline.html` into the folder of each prediction of a run (of `only`: a scenario id, a
    `task/protocol` or a prediction folder's name); the pages written."""
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    file = (run.get("predictions_file") or {}).get("path") if isinstance(run, Mapping) else None
    predictions = Path(file) if isinstance(file, str) else None  # as evaluate.py was given it
    agents_runs = list(agents_runs)
    folders = result_folders(run_dir)
    written = []
    for row in report.get("predictions") or []:
        folder = folders.get(row.get("line"))
        if folder is None:
            continue
        line = predictions_line(predictions, row.get("line"))
        runner = (line or {}).get("runner")
        scenario = runner.get("scenario_id") if isinstance(runner, Mapping) else None
        names = {folder.name, f"{row.get('task_id')}/{row.get('protocol')}", scenario}
        if only is not None and only not in names:
            continue
        sources = prediction_sources(folder, run_dir, line, predictions.parent if predictions else None,
                                     agents_runs, row)
        written.append(write_timeline_html(build_timeline(sources), folder / PAGE))
    return written
