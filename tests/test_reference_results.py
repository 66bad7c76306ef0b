"""Each task's reference result (data/reference_results.yaml) and where it must reach: the statement, the dependency
rows, the card and the reports.

A task whose reference state (every writable file as upstream wrote it) still fails tests cannot reach final success
whatever agents do; the agent-facing text must say so near the top, with the best reachable result, the dependency
rows whose probes cannot pass must say so in their summaries, the card must list the task, and a report must show
beside FSR how many of a cell's tasks can succeed at all.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from asyncodebench.dataset import reference_results
from asyncodebench.dataset.reference_results import ReferenceResultError
from asyncodebench.dataset.rows import load_published
from asyncodebench.reports.report import build_report, markdown
from asyncodebench.reports.synthetic import synthetic_inputs, typed_results
from asyncodebench.run.predictions import PredictionFile

ROOT = Path(__file__).resolve().parent.parent
RESULTS = reference_results.load()
ROWS = load_published(str(ROOT)).rows
CEILINGS = sorted(t for t, r in RESULTS.items() if r.reaches_final_success is False)


def test_every_task_has_a_reference_result_or_says_why_not() -> None:
    assert set(RESULTS) == {t["task_id"] for t in ROWS.tasks}
    for task_id, result in RESULTS.items():
        if result.counts is None:
            assert result.not_measured and "image" in result.not_measured, task_id
        else:
            assert result.command and task_id in result.command and result.image, task_id
    assert CEILINGS == ["asyncodebench:filesystem_spec", "asyncodebench:flask"]
    assert sorted(t for t, r in RESULTS.items() if r.counts is None) == [
        f"asyncodebench:apache-tvm-{n}" for n in (20018, 20073, 20107, 20153)]


@pytest.mark.parametrize("task_id", CEILINGS)
def test_a_task_that_cannot_succeed_says_so_near_the_top_of_its_statement(task_id: str) -> None:
    (task,) = [t for t in ROWS.tasks if t["task_id"] == task_id]
    result = RESULTS[task_id]
    top = task["problem_statement"].split("\n## Background\n", 1)[1][:1200]
    said = " ".join(top.split())
    assert "Final success cannot be reached in this task." in said
    assert f"{result.counts_text} is the best reachable result" in said or \
        f"passes {result.counts['passed']} of the {result.counts['collected']} tests" in said
    assert "best reachable result" in said and "ceiling" in said


@pytest.mark.parametrize("task_id", CEILINGS)
def test_the_rows_whose_probes_cannot_pass_say_so_first_in_their_summaries(task_id: str) -> None:
    """The kit's audit_note of a point records that its probes fail at the reference; the summary agents read
    must open with it."""
    result = RESULTS[task_id]
    blocked = [d for d in ROWS.dependencies if d["task_id"] == task_id
               and "pass for agents that keep to their writable paths" in " ".join((d["audit_note"] or "").split())]
    assert blocked, "the audit notes name the points that cannot pass"
    for dependency in blocked:
        first = dependency["contract_summary"].split(". ", 1)[0]
        assert "cannot pass from the writable files" in first.lower(), dependency["dependency_id"]
        assert result.counts_text in first, dependency["dependency_id"]


def test_the_card_lists_every_task_that_cannot_succeed() -> None:
    card = (ROOT / "README.md").read_text().split("## Bias, risks and limitations", 1)[1].split("###", 1)[0]
    card = " ".join(card.split())
    for task_id in CEILINGS:
        result = RESULTS[task_id]
        assert f"`{task_id.split(':', 1)[1]}` ({result.counts_text}" in card, task_id
    assert "cannot succeed" in card and "TVM unmeasured" in card


def test_a_malformed_record_is_refused_with_what_to_fix(tmp_path: Path) -> None:
    entry = {"counts": {"collected": 10, "passed": 8, "failed": 2, "errors": 0, "skipped": 0},
             "reaches_final_success": True, "command": "c", "image": "i"}
    path = tmp_path / "reference_results.yaml"
    path.write_text(yaml.safe_dump({"tasks": {"x:y": entry}}))
    with pytest.raises(ReferenceResultError, match="reaches_final_success must be False"):
        reference_results.load(path)
    path.write_text(yaml.safe_dump({"tasks": {"x:y": {**entry, "reaches_final_success": False}}}))
    with pytest.raises(ReferenceResultError, match="hollow"):
        reference_results.load(path)


def test_the_report_shows_beside_fsr_how_many_tasks_can_succeed() -> None:
    metadata, file, results = synthetic_inputs(tasks=3, models=("m",), protocols=("single",), points=3,
                                               infrastructure_errors=0)
    names = dict(zip(sorted({r["task_id"] for r in results}),
                     ("asyncodebench:cachetools", "asyncodebench:flask", "asyncodebench:apache-tvm-20018")))
    for result in results:
        result["task_id"] = names[result["task_id"]]
    file = PredictionFile(file.path, file.sha256, tuple(dataclasses.replace(p, task_id=names[p.task_id])
                                                        for p in file.predictions), file.problems)
    report = build_report(metadata, file, typed_results(results))
    (row,) = report["summary"]
    assert (row["tasks"], row["reachable_tasks"], row["unmeasured_tasks"]) == (3, 1, 1)
    text = markdown(report)
    assert "| tasks | can succeed | FSR |" in text and "| 3 | 1 (+1 unmeasured) |" in text
