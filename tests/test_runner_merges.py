"""Merge and scope figures of predictions that give their own checkpoints (the manager protocols' runs): the harness
merges nothing there, so the report takes the agent runner's record (`runner.merges`), marked as reported.

The end-to-end case (run_agents.py under both manager protocols, then evaluate.py) is in
tests/test_run_agents_managers.py; here the reading, the result record and the report, without containers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.checkout import DEMO_TASK_ID
from helpers.predictions import jsonl, prediction

from asyncodebench.harness.integration import AgentMerge, Integration
from asyncodebench.reports.flags import row_flags
from asyncodebench.reports.report import build_report, markdown, prediction_row
from asyncodebench.reports.synthetic import synthetic_inputs, typed_results
from asyncodebench.run.prediction_result import IntegrationFacts, MergeFacts
from asyncodebench.run.predictions import Prediction, read_predictions
from asyncodebench.run.results import PATHS_LISTED, integration_facts

TASKS = {DEMO_TASK_ID: {"core_agent", "api_agent"}}
FINAL = {"checkpoint_type": "final_integrated", "workspace_kind": "integrated_workspace", "patch": "diff"}
# the runner's record: a clean merge, a conflict, an artifact rejected for touching a test
MERGES: list[dict[str, Any]] = [
    {"agent_id": "core_agent", "merge_status": "clean", "strategy": "git-apply", "reason": None, "out_of_scope": []},
    {"agent_id": "api_agent", "merge_status": "conflict", "strategy": "git-apply-3way", "reason": "merge_conflict",
     "out_of_scope": []},
    {"agent_id": "api_agent", "merge_status": "error", "strategy": None, "reason": "scope_violation",
     "out_of_scope": ["tests/test_api.py"]},
]


def _line(name: str, merges: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {**prediction(name, "", protocol="caid_manager"), "checkpoints": [FINAL],
            "runner": {"scenario_id": "x", "merges": merges}, **fields}


def test_the_runners_merges_are_read_and_a_malformed_record_is_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    bad = [{**MERGES[0], "merge_status": "merged-somehow"}]
    path.write_bytes(jsonl([_line("m-good", MERGES), _line("m-bad", bad), _line("m-no-merges", [])]))
    file = read_predictions(path, TASKS, None)
    by_model = {p.model: p for p in file.predictions}
    assert sorted(by_model) == ["m-good", "m-no-merges"]
    assert by_model["m-good"].reported_merges == (
        MergeFacts("core_agent", "clean", "git-apply", None, ()),
        MergeFacts("api_agent", "conflict", "git-apply-3way", "merge_conflict", ()),
        MergeFacts("api_agent", "error", None, "scope_violation", ("tests/test_api.py",)))
    assert by_model["m-no-merges"].reported_merges == ()
    (problem,) = file.problems
    assert (problem.line, problem.kind) == (2, "schema_error") and "merge_status" in problem.message


def _prediction(tmp_path: Path, without_checkpoints: bool = False) -> Prediction:
    line = _line("m", MERGES)
    if without_checkpoints:
        line = {**{k: v for k, v in line.items() if k != "checkpoints"}, "model_patch": "diff"}
    path = tmp_path / "one.jsonl"
    path.write_bytes(jsonl([line]))
    (found,) = read_predictions(path, TASKS, None).predictions
    return found


def test_the_result_counts_the_runners_merges_only_when_the_harness_merged_nothing(tmp_path: Path) -> None:
    given = _prediction(tmp_path)
    facts = integration_facts(None, given)
    assert facts == IntegrationFacts("caid_manager", 3, 1, 1, given.reported_merges, "runner")
    assert IntegrationFacts.from_json(facts.to_json()) == facts
    # The harness's own merges win; a line without checkpoints (model_patch only) is not integrated at all.
    harness = Integration("caid_manager", (AgentMerge("core_agent", "clean", "git-apply", None, (), "", ""),), "")
    own = integration_facts(harness, given)
    assert own is not None and (own.agents, own.merge_conflicts, own.source) == (1, 0, "harness")
    assert integration_facts(None, _prediction(tmp_path, without_checkpoints=True)) is None


def test_the_runners_path_lists_are_bounded_like_the_harnesss(tmp_path: Path) -> None:
    many = [{**MERGES[2], "out_of_scope": [f"tests/t{i}.py" for i in range(PATHS_LISTED + 100)]}]
    path = tmp_path / "many.jsonl"
    path.write_bytes(jsonl([_line("m", many)]))
    (given,) = read_predictions(path, TASKS, None).predictions
    facts = integration_facts(None, given)
    assert facts is not None and facts.scope_violations == 1
    assert facts.merges[0].out_of_scope == tuple(f"tests/t{i}.py" for i in range(PATHS_LISTED))


def test_an_older_result_without_a_source_reads_as_the_harnesss() -> None:
    old = {"protocol": "async_private", "agents": 1, "merge_conflicts": 0, "scope_violations": 0, "merges": []}
    facts = IntegrationFacts.from_json(old)
    assert facts is not None and facts.source == "harness"


def test_the_report_gives_the_runners_rates_marked_as_reported() -> None:
    metadata, file, results = synthetic_inputs(tasks=3, points=3, models=("m1",),
                                               protocols=("caid_manager", "async_private"), infrastructure_errors=0)
    runner = IntegrationFacts("caid_manager", 3, 1, 1, tuple(MergeFacts(m["agent_id"], m["merge_status"],
                                                                         m["strategy"], m["reason"],
                                                                         tuple(m["out_of_scope"])) for m in MERGES),
                              "runner").to_json()
    harness = IntegrationFacts("async_private", 2, 0, 0, (), "harness").to_json()
    for result in results:
        result["integration"] = runner if result["protocol"] == "caid_manager" else harness
    report = build_report(metadata, file, typed_results(results))  # validated against schemas/report.schema.json
    rows = {r["protocol"]: r for r in report["summary"]}
    assert (rows["caid_manager"]["merge_conflict_rate"], rows["caid_manager"]["scope_violation_rate"]) == (
        1 / 3, 1 / 3)
    assert rows["caid_manager"]["artifacts_reported_by_runner"] == 9
    assert (rows["async_private"]["merge_conflict_rate"], rows["async_private"]["artifacts_reported_by_runner"]) == (
        0.0, 0)
    text = markdown(report)
    assert "| 33.3 (runner) | 33.3 (runner) |" in text and "| 0.0 | 0.0 |" in text
    assert any("runner's own record of its merges" in note and "3 of 6" in note for note in report["notes"])
    typed = typed_results(results)
    labels = [f.label for f in row_flags(prediction_row(
        next(r for r in typed if r.identity.protocol == "caid_manager")))]
    assert "1 agent scope violation(s) (runner's record)" in labels
    assert "1 merge conflict(s) (runner's record)" in labels
    harness_labels = [f.label for f in row_flags(prediction_row(
        next(r for r in typed if r.identity.protocol == "async_private")))]
    assert not any("runner" in label for label in harness_labels)

