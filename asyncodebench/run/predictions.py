"""Read a predictions file line by line: every valid line is kept, every bad one reported with its line number.

A bad line never sinks the others. Problems are: malformed JSON, schema errors (`schemas/prediction.schema.json`),
an unknown task or protocol, a model name that is not UTF-8 text, and duplicates of an earlier line.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from asyncodebench.dataset.protocols import INTEGRATED_PROTOCOLS, PROTOCOLS
from asyncodebench.dataset.validation import validator
from asyncodebench.run.prediction_result import MergeFacts, RunnerFacts
from asyncodebench.scoring.provenance import Timeline, timeline_of

CheckpointType = Literal["agent_artifact", "integration_after_merge", "manager_integration", "final_integrated"]
WorkspaceKind = Literal["agent_workspace", "integrated_workspace"]


@dataclass(frozen=True)
class Checkpoint:
    """One workspace state a multi-agent run recorded: a cumulative patch against the base."""

    checkpoint_type: CheckpointType
    workspace_kind: WorkspaceKind
    agent_id: str | None
    patch: str | None

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Checkpoint:
        """A checkpoint of a predictions-file line the schema already accepted."""
        return cls(value["checkpoint_type"], value["workspace_kind"], value.get("agent_id"), value.get("patch"))


@dataclass(frozen=True)
class Prediction:
    """One valid prediction."""

    line: int
    task_id: str
    protocol: str
    model: str
    run_id: str | None
    model_patch: str
    checkpoints: tuple[Checkpoint, ...]
    agent_patches: dict[str, str]
    usage: dict[str, Any]
    trajectories: tuple[str, ...] = ()  # the agents' trajectory files, relative to the predictions file
    # the agent runner's own record of its merges (`runner.merges`): reported, never scored; the report's merge and
    # scope rates use it only when the harness integrated nothing (the prediction gave its checkpoints)
    reported_merges: tuple[MergeFacts, ...] = ()
    # what evaluate.py checks of the agent runner's record (`runner`): validity, budget, kit version; None: no record
    runner: RunnerFacts | None = None
    # the paths the agent runner says it dropped from the agents' patches (`runner.agents[].dropped`, a single
    # agent's edits outside its writable paths): shown with the prediction's flags, never scored
    runner_dropped: tuple[str, ...] = ()
    # where its checkpoint timeline comes from (`scoring.provenance`); None: no multi-agent timeline
    timeline: Timeline | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What no two predictions of a file share: model, protocol, task and run id (a later line is a duplicate)."""
        return (self.model, self.protocol, self.task_id, self.run_id or "")

    @property
    def slug(self) -> str:
        """A folder name unique to the key, readable, safe on any filesystem."""
        digest = hashlib.sha256("\0".join(self.key).encode()).hexdigest()[:8]
        name = f"{self.model}__{self.protocol}__{self.task_id}" + (f"__{self.run_id}" if self.run_id else "")
        return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)[:150]}__{digest}"


@dataclass(frozen=True)
class LineProblem:
    """A line that was skipped, and why."""

    line: int
    kind: str  # malformed_json | schema_error | unknown_task | unknown_protocol | duplicate
    message: str


@dataclass(frozen=True)
class PredictionFile:
    """A predictions file as read: its path and SHA-256, its valid predictions, and the lines skipped."""

    path: str
    sha256: str
    predictions: tuple[Prediction, ...]
    problems: tuple[LineProblem, ...]


def read_predictions(path: Path, known_tasks: dict[str, set[str]], default_protocol: str | None) -> PredictionFile:
    """Parse and check `path` (JSONL, or a JSON list); `known_tasks` maps each task id to its specialists' ids.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    raw = path.read_bytes()
    # Surrogate escapes keep a patch's bytes that are not UTF-8 (the runner turns them back into those bytes); a
    # byte-order mark from Windows editors is not part of the first line.
    entries, problems = _entries(raw.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff"))
    predictions: list[Prediction] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    check = validator("prediction")
    for line, obj in entries:
        errors = sorted(check.iter_errors(obj), key=lambda e: list(e.absolute_path)) if isinstance(obj, dict) else []
        if not isinstance(obj, dict):
            problems.append(LineProblem(line, "schema_error", "a prediction must be a JSON object"))
        elif errors and all(list(e.absolute_path) == ["protocol"] for e in errors):
            hint = f"choose one of {', '.join(PROTOCOLS)}"
            problems.append(LineProblem(line, "unknown_protocol", f"unknown protocol {obj['protocol']!r}: {hint}"))
        elif errors:
            problems.append(LineProblem(line, "schema_error", "; ".join(_describe(e) for e in errors[:5])))
        elif _not_utf8(obj.get("model_name_or_path")):
            # It names folders and report rows: undecodable bytes there would crash the run, not just this line.
            problems.append(LineProblem(line, "schema_error", "model_name_or_path is not valid UTF-8 text"))
        else:
            problem = _admit(line, obj, known_tasks, default_protocol, seen, predictions, path.parent)
            if problem:
                problems.append(problem)
    return PredictionFile(str(path), hashlib.sha256(raw).hexdigest(), tuple(predictions),
                          tuple(sorted(problems, key=lambda p: p.line)))


def _entries(text: str) -> tuple[list[tuple[int, Any]], list[LineProblem]]:
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            return [], [LineProblem(1, "malformed_json",
                                    f"the file looks like a JSON list but is not valid JSON: {exc}")]
        return [(i + 1, item) for i, item in enumerate(items)], []
    entries, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(LineProblem(number, "malformed_json", f"not valid JSON ({exc.msg} at column {exc.colno})"))
    return entries, problems


def _not_utf8(text: Any) -> bool:
    r"""True for text holding lone surrogates: bytes that were not UTF-8, or JSON escapes such as `\udce9`."""
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _admit(line: int, obj: dict[str, Any], known_tasks: dict[str, set[str]], default_protocol: str | None,
           seen: dict[tuple[str, str, str, str], int], predictions: list[Prediction],
           folder: Path) -> LineProblem | None:
    task_id = obj.get("task_id") or obj["instance_id"]
    if task_id not in known_tasks:
        return LineProblem(line, "unknown_task", f"unknown task {task_id!r}; the dataset has {len(known_tasks)} tasks")
    protocol = obj.get("protocol") or default_protocol
    if protocol not in PROTOCOLS:
        hint = ("give `protocol` on the line or --protocol" if protocol is None
                else f"choose one of {', '.join(PROTOCOLS)}")
        return LineProblem(line, "unknown_protocol", f"unknown protocol {protocol!r}: {hint}")
    prediction = Prediction(
        line, task_id, protocol, obj["model_name_or_path"], obj.get("run_id"), obj.get("model_patch") or "",
        tuple(Checkpoint.from_json(c) for c in obj.get("checkpoints") or ()),
        {k: v or "" for k, v in (obj.get("agent_patches") or {}).items()},
        obj.get("usage") or {},
        tuple(obj.get("trajectories") or ()),
        tuple(MergeFacts(m["agent_id"], m["merge_status"], m.get("strategy"), m.get("reason"), tuple(m["out_of_scope"]))
              for m in (obj.get("runner") or {}).get("merges") or ()),
        RunnerFacts.from_line(obj.get("runner")),
        tuple(dict.fromkeys(d["path"] for a in (obj.get("runner") or {}).get("agents") or ()
                            for d in a.get("dropped") or ())),
        timeline_of(obj.get("checkpoints") or (), bool(obj.get("agent_patches")),
                    (obj.get("runner") or {}).get("timeline"), _reader(folder)),
    )
    problem = _work_problem(prediction, known_tasks[task_id])
    if problem:
        return LineProblem(line, "schema_error", problem)
    if prediction.key in seen:
        return LineProblem(line, "duplicate",
                           f"same model, protocol, task and run_id as line {seen[prediction.key]}; skipped")
    seen[prediction.key] = line
    predictions.append(prediction)
    return None


def _reader(folder: Path) -> Callable[[str], bytes | None]:
    """Reads a file the line names by a path relative to the predictions file's folder, never outside it."""
    root = folder.resolve()

    def read(relative: str) -> bytes | None:
        try:
            path = (root / relative).resolve()
            return path.read_bytes() if path.is_relative_to(root) and path.is_file() else None
        except (OSError, ValueError):  # a name the filesystem refuses, a loop of links
            return None

    return read


def _work_problem(prediction: Prediction, agents: set[str]) -> str | None:
    """What makes a prediction's work unusable, if anything (checked beyond the schema)."""
    if prediction.agent_patches and prediction.checkpoints:
        return "give either agent_patches (the harness integrates them) or checkpoints, not both"
    if prediction.agent_patches and prediction.protocol not in INTEGRATED_PROTOCOLS:
        return f"agent_patches are integrated only for {', '.join(INTEGRATED_PROTOCOLS)}, not {prediction.protocol}"
    kinds = [c.checkpoint_type for c in prediction.checkpoints]
    if "final_integrated" in kinds[:-1]:
        return "only the last checkpoint may be final_integrated"
    if kinds and kinds[-1] != "final_integrated" and not prediction.model_patch:
        return "the final state is missing: end checkpoints with a final_integrated one, or give model_patch"
    unknown = sorted(set(prediction.agent_patches) - agents)
    if unknown:
        return f"agent_patches names agents {unknown} that are not specialists of the task ({sorted(agents)})"
    return None
