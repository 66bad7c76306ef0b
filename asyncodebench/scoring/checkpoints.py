"""Write and read dependency probe checkpoints in the upstream record layout (schema 0.1, METRICS 0.1 step 4).

`build_checkpoint_record` turns the selector results of one probe pass into the JSON object the runner appends to
`dependency_probe_checkpoints.jsonl`; `load_checkpoint_file` reads such a file back into `CheckpointRecord`s for
the metrics, refusing files whose order, completeness or group verdicts cannot be trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from asyncodebench.scoring.dependency import CheckpointRecord, DependencyOutcome, DependencyPoint
from asyncodebench.scoring.grading import SELECTOR_STATUSES, TIMEOUT_EXIT_CODE, SelectorResult, group_state

SCHEMA_VERSION = "0.1"
"""Version of the checkpoint record layout written and accepted here."""

OUTPUT_EXCERPT_CHARS = 4000
"""How much of the end of the probe output a record keeps."""

REQUIRED_FIELDS = (
    "schema_version", "checkpoint_id", "checkpoint_type", "logical_step", "recorded_at", "workspace_kind",
    "probe_test_results", "dependency_results",
)
"""Fields a recorded line must carry for the metrics to be recomputed; the other layout fields are optional on
reading, so files from older runners that lack, for example, `source_build` still load."""


class CheckpointFileError(ValueError):
    """A recorded checkpoint file cannot be scored; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class CheckpointContext:
    """Where and when a checkpoint was taken: every record field that does not come from the probes."""

    task_id: str  # asyncodebench:<repo>
    source_task_id: str  # provenance id, commit0:<repo>
    metric_annotation_id: str | None  # id of the metrics manifest annotation
    metrics_manifest: str | None  # path or name of the metrics manifest the selectors come from
    checkpoint_id: str  # unique in the run; "final_integrated" for the last one
    checkpoint_type: str  # agent_artifact, integration_after_merge, final_integrated, or a manager type
    logical_step: int  # 1 + non-empty lines already in the file (see next_logical_step)
    recorded_at: str  # ISO 8601 time of the probe pass
    agent_id: str | None  # specialist whose work is probed; None for integrated checkpoints without one
    task_assignment_id: str | None  # the specialist's assignment id in the scenario
    workspace_kind: str  # "agent_workspace" or "integrated_workspace"
    workspace_path: str  # path of the probed workspace
    artifact_version: str | None  # version of the specialist's artifact
    visible_upstream_artifact_version: str | None  # upstream artifact version the specialist could see
    integrated_workspace_version: str | None  # commit of the integrated workspace
    probe_execution_mode: str  # "per_selector" or a batched mode proven equivalent (decision 8)
    probe_timeout_seconds: int  # P, 60 in the official profile
    source_build: dict[str, Any] | None  # TVM source-build status; None for tasks without a build


def next_logical_step(existing_text: str) -> int:
    """The logical step of the next record: 1 + the non-empty lines already in the checkpoint file."""
    return 1 + sum(1 for line in existing_text.splitlines() if line.strip())


def probe_selectors(dependencies: Sequence[DependencyPoint]) -> list[str]:
    """The selector set S: every probe selector of every dependency, sorted and de-duplicated."""
    return sorted({selector for dep in dependencies for group in dep.groups().values() for selector in group})


def _dependency_result(dependency: DependencyPoint, results: Mapping[str, SelectorResult]) -> dict[str, Any]:
    """One `dependency_results` entry: the three group states of a dependency."""
    return {
        "dependency_id": dependency.dependency_id,
        "producer_agent": dependency.producer_agent,
        "consumer_agent": dependency.consumer_agent,
        "groups": {name: group_state(selectors, results).to_record()
                   for name, selectors in dependency.groups().items()},
    }


def build_checkpoint_record(
    context: CheckpointContext,
    dependencies: Sequence[DependencyPoint],
    results: Mapping[str, SelectorResult],
    selector_exit_codes: Mapping[str, int | None],
    test_output: str,
) -> dict[str, Any]:
    """Assemble one checkpoint line from the probe results of every selector of the task.

    Args:
        context: the non-probe fields of the record.
        dependencies: the task's dependency points; their selectors form S.
        results: the status of each selector of S, from `grading.selector_status`.
        selector_exit_codes: the exit code of the pytest run that probed each selector.
        test_output: the probe runs' combined output; the record keeps its last 4000 characters.

    Raises:
        ValueError: a selector of S has no result or no exit code; probe every selector before recording.
    """
    selectors = probe_selectors(dependencies)
    missing = [selector for selector in selectors if selector not in results or selector not in selector_exit_codes]
    if missing:
        raise ValueError(f"no probe result or exit code for selector(s) {missing}; probe every selector first")
    statuses = [results[selector].status for selector in selectors]
    any_timeout = "timed_out" in statuses
    all_passed = all(results[selector].passed for selector in selectors)
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **asdict(context)}
    record.update({
        "pytest_exit_code": TIMEOUT_EXIT_CODE if any_timeout else (0 if all_passed else 1),
        "pytest_summary": {"total": len(selectors), **{status: statuses.count(status) for status in SELECTOR_STATUSES}},
        "timed_out": any_timeout,
        "selector_exit_codes": {selector: selector_exit_codes[selector] for selector in selectors},
        "selector_timed_out": {selector: results[selector].status == "timed_out" for selector in selectors},
        "probe_test_results": {selector: results[selector].to_record() for selector in selectors},
        "dependency_results": [_dependency_result(dep, results) for dep in dependencies],
        "test_output_excerpt": test_output[-OUTPUT_EXCERPT_CHARS:],
    })
    return record


def record_to_checkpoint(record: Mapping[str, Any], dependencies: Sequence[DependencyPoint]) -> CheckpointRecord:
    """Reduce a record dict (just built, or parsed from a file) to what the metrics read.

    Group verdicts are recomputed from `probe_test_results` and the dependency rows' selectors, so a record cannot
    claim a pass its probes do not show.

    Raises:
        ValueError: a field is missing or a dependency, group or selector is absent or inconsistent.
    """
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        raise ValueError(f"missing field(s) {missing}")
    if record["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"schema_version is {record['schema_version']!r}; only {SCHEMA_VERSION!r} can be read")
    selector_passed = _selector_passed(record["probe_test_results"], dependencies)
    if not isinstance(record["dependency_results"], list):
        raise ValueError("dependency_results is not a list of dependency entries")
    recorded = {row.get("dependency_id"): row for row in record["dependency_results"] if isinstance(row, Mapping)}
    outcomes = tuple(_outcome(dep, recorded.get(dep.dependency_id), selector_passed) for dep in dependencies)
    return CheckpointRecord(
        logical_step=record["logical_step"],
        checkpoint_type=str(record["checkpoint_type"]),
        checkpoint_id=str(record["checkpoint_id"]),
        workspace_kind=str(record["workspace_kind"]),
        recorded_at=str(record["recorded_at"]),
        outcomes=outcomes,
    )


def _selector_passed(probe_results: Any, dependencies: Sequence[DependencyPoint]) -> dict[str, bool]:
    """Each selector's recorded `passed` flag, checking that every selector of the dependency rows is there."""
    if not isinstance(probe_results, Mapping):
        raise ValueError("probe_test_results is not an object keyed by selector")
    passed: dict[str, bool] = {}
    for selector in probe_selectors(dependencies):
        entry = probe_results.get(selector)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("passed"), bool):
            raise ValueError(f"selector {selector!r} of the dependency rows has no probe result with a boolean "
                             "'passed'; re-run the probes with the current dependency rows")
        passed[selector] = entry["passed"]
    return passed


def _outcome(dependency: DependencyPoint, recorded: Mapping[str, Any] | None,
             selector_passed: Mapping[str, bool]) -> DependencyOutcome:
    """A dependency's group verdicts, recomputed from selector results and checked against the recorded ones."""
    if recorded is None:
        raise ValueError(f"dependency {dependency.dependency_id!r} of the dependency rows is missing from "
                         "dependency_results; re-run the probes with the current dependency rows")
    groups = recorded.get("groups")
    verdicts: dict[str, bool] = {}
    for name, selectors in dependency.groups().items():
        verdict = bool(selectors) and all(selector_passed[selector] for selector in selectors)
        entry = groups.get(name) if isinstance(groups, Mapping) else None
        if not isinstance(entry, Mapping):
            raise ValueError(f"dependency {dependency.dependency_id!r} has no {name!r} group in dependency_results")
        claimed = entry.get("passed")
        if claimed is not verdict:
            raise ValueError(f"dependency {dependency.dependency_id!r} group {name!r} records passed={claimed!r} "
                             f"but its selectors' probe results give {verdict}")
        verdicts[name] = verdict
    return DependencyOutcome(dependency.dependency_id, verdicts["upstream"], verdicts["downstream"],
                             verdicts["integrated"])


def _parse_line(text: str) -> Mapping[str, Any]:
    """Parse one JSONL line into a record object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"malformed JSON ({error.msg} at column {error.colno})") from error
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _text_lines(path: Path) -> list[str]:
    """The file's lines as UTF-8 text; a leading byte-order mark (as Windows editors write) is not part of line 1.

    Raises:
        CheckpointFileError: the file is not UTF-8 text (binary data, another encoding), with where it stops being so.
    """
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise CheckpointFileError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); give the "
            "dependency_probe_checkpoints.jsonl a run wrote (JSON lines)") from None
    return text.splitlines()


def load_checkpoint_file(path: str | Path, dependencies: Sequence[DependencyPoint]) -> list[CheckpointRecord]:
    """Read a recorded `dependency_probe_checkpoints.jsonl` and refuse it unless every metric can trust it.

    Accepted files have steps 1..n in write order, cover every dependency and selector of the task's rows, agree
    with their own probe results, and end with the single final_integrated checkpoint.

    Raises:
        CheckpointFileError: the first problem found, with its line number and what to do about it.
    """
    path = Path(path)
    records: list[CheckpointRecord] = []
    number = 0
    for number, text in enumerate(_text_lines(path), start=1):
        if not text.strip():
            continue
        try:
            checkpoint = record_to_checkpoint(_parse_line(text), dependencies)
            if checkpoint.logical_step != len(records) + 1:
                raise ValueError(f"logical_step is {checkpoint.logical_step}, expected {len(records) + 1}: steps "
                                 "must run 1..n in write order; the file was reordered, edited or merged")
            if records and records[-1].is_final:
                raise ValueError("a checkpoint follows the final_integrated one, which must be last")
        except ValueError as error:
            raise CheckpointFileError(f"{path}, line {number}: {error}") from error
        records.append(checkpoint)
    if not records:
        raise CheckpointFileError(f"{path}: the file holds no checkpoints; the run wrote no probe results")
    if not records[-1].is_final:
        raise CheckpointFileError(f"{path}, line {number}: no final_integrated checkpoint at the end of the file; "
                                  "the run stopped before its final evaluator probe and cannot be scored")
    return records
