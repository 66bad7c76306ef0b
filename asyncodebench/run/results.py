"""Turn the raw evidence of one evaluation into its graded, typed result (no Docker: rescoring uses it too)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

import asyncodebench
from asyncodebench.harness.checks import audit_flags, evidence_needs_review, examine_evidence
from asyncodebench.harness.evaluation import Evidence
from asyncodebench.harness.integration import Integration
from asyncodebench.harness.native import BuildRun
from asyncodebench.harness.probes import ProbeRun, selector_results
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.run.prediction_result import (
    BuildFacts,
    DependencyFacts,
    Evaluation,
    EvaluatorFacts,
    Identity,
    InfrastructureFailure,
    InfrastructureKind,
    IntegrationFacts,
    Integrity,
    MergeFacts,
    PatchFacts,
    PredictionResult,
    Protection,
    SadProxy,
    Score,
)
from asyncodebench.run.predictions import Prediction
from asyncodebench.scoring.checkpoints import CheckpointContext, build_checkpoint_record, record_to_checkpoint
from asyncodebench.scoring.dependency import RunMetrics, run_metrics
from asyncodebench.scoring.grading import (
    Baseline,
    GradeResult,
    grade,
    identity_record,
    integrity_failure,
    normalize_report,
    skip_integrity_record,
)
from asyncodebench.scoring.patches import outside_scope
from asyncodebench.scoring.review import review_prediction
from asyncodebench.scoring.sad import sad_proxy_candidates

TAMPERING_LISTED = 50  # contradictions kept in a result (each names its process)
PATHS_LISTED = 200  # paths kept per list in a result
PATCH_FAILURE_KINDS = {"failed": "patch_did_not_apply", "unsafe_paths": "patch_unsafe_paths",
                       "unusable": "patch_unusable"}
SUMMARY_COUNTS = ("passed", "failed", "errors", "skipped", "xfailed", "total", "collected")
UNMEASURED_NOTE = ("the dependency probes were not run (--no-probes): ADPR, DRS, DRE, CAIL and the unresolved count "
                   "were not measured")
_UNMEASURED_RUN_METRICS = ("final_pass_count", "adpr", "unresolved_count", "drs_penalized_mean", "dre_mean",
                           "cail_penalized_mean")
_UNMEASURED_DEPENDENCY = ("final_integrated_pass", "drs", "up", "down", "resolved", "drs_penalized", "dre", "cail_raw",
                          "cail_penalized")


def checkpoint_record(spec: TaskSpec, probes: ProbeRun | None, step: int, kind: tuple[str, str, str | None],
                      workspace_version: str, recorded_at: str, build: BuildRun | None = None,
                      base_ids: Mapping[str, frozenset[str]] | None = None) -> dict[str, Any]:
    """One checkpoint record (upstream layout) of a probed state; `kind` is (type, workspace kind, agent); `build`
    is the state's native build, kept as `source_build` (a state that did not build runs no probe); `base_ids`:
    per selector, the node ids the base state's probes collected for it (decision 14)."""
    checkpoint_type, workspace_kind, agent_id = kind
    results = selector_results(probes, spec.selectors, base_ids)
    calls = probes.calls if probes else ()
    exit_codes = {s: next((c.exit_code for c in reversed(calls) if s in c.selectors), None) for s in spec.selectors}
    final = checkpoint_type == "final_integrated"
    context = CheckpointContext(
        task_id=spec.task_id, source_task_id=spec.task_id, metric_annotation_id=None, metrics_manifest=None,
        checkpoint_id="final_integrated" if final else f"{checkpoint_type}:{agent_id or step}:{step}",
        checkpoint_type=checkpoint_type, logical_step=step, recorded_at=recorded_at, agent_id=agent_id,
        task_assignment_id=agent_id, workspace_kind=workspace_kind, workspace_path=spec.workdir,
        artifact_version=None, visible_upstream_artifact_version=None, integrated_workspace_version=workspace_version,
        probe_execution_mode=probes.mode if probes else "not_run",
        probe_timeout_seconds=probes.probe_timeout if probes else 0,
        source_build=build.to_json() if build is not None else None,
    )
    output = "\n".join(c.output_tail for c in calls)
    return build_checkpoint_record(context, spec.dependencies, results, exit_codes, output)


def checkpoint_records(spec: TaskSpec, evidence: Evidence, recorded_at: str,
                       base_ids: Mapping[str, frozenset[str]] | None = None) -> list[dict[str, Any]]:
    """Every checkpoint of the evaluation in write order: intermediate states, then final_integrated."""
    records = [
        checkpoint_record(spec, s.probes, i, (s.checkpoint_type, s.workspace_kind, s.agent_id),
                          s.preparation.canonical_ref, recorded_at, s.build, base_ids)
        for i, s in enumerate(evidence.states, start=1)
    ]
    final_kind = ("final_integrated", "integrated_workspace", None)
    records.append(checkpoint_record(spec, evidence.probes, len(records) + 1, final_kind,
                                     evidence.preparation.canonical_ref, recorded_at, evidence.build, base_ids))
    return records


def dependency_trace(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per dependency, which probe group passed at which step (for tables and plots)."""
    trace: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        for dep in record["dependency_results"]:
            trace.setdefault(dep["dependency_id"], []).append({
                "step": record["logical_step"], "checkpoint_type": record["checkpoint_type"],
                "workspace_kind": record["workspace_kind"], "agent_id": record["agent_id"],
                **{group: state["passed"] for group, state in dep["groups"].items()},
            })
    return trace


def score(spec: TaskSpec, prediction: Prediction, evidence: Evidence, baseline: Baseline | None = None,
          recorded_at: str | None = None, probes_ran: bool = True) -> PredictionResult:
    """The result of one evaluated prediction (its checkpoint records ride along in `evaluation.checkpoints`).

    `baseline` is the base state's run in the same image (METRICS decisions 9 and 12), None when not measured.
    `probes_ran` is False when the run turned the dependency probes off: the dependency metrics are then recorded
    as not measured. `integrity.review` holds the review flags of every patch the prediction carries: shown, never
    scored.
    """
    recorded_at = recorded_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    needs_review = evidence_needs_review(evidence)
    evidence, tampering = examine_evidence(evidence)
    prep = evidence.preparation
    normalized = normalize_report(evidence.report, evidence.exit_code, evidence.output)
    patch_failure = PATCH_FAILURE_KINDS.get(prep.patch_status)
    graded = grade(normalized, evidence.exit_code, spec.expected_total, baseline)
    records = checkpoint_records(spec, evidence, recorded_at, baseline.selector_ids if baseline else None)
    metrics = run_metrics([record_to_checkpoint(r, spec.dependencies) for r in records], spec.dependencies)
    integrity = integrity_failure(normalized, baseline)
    blocked_by_integrity = integrity is not None and graded.outcome == f"model_failure:{integrity}"
    # These score 0 against the expected total, whatever the report says: a patch that never reached the code, a
    # state whose native build failed (decision 13), and a pytest process whose evidence contradicts itself (11).
    build_failed = patch_failure is None and evidence.build is not None and not evidence.build.succeeded
    zeroed = patch_failure or ("build_failed" if build_failed else None) or (
        "integrity_tampering" if tampering else None)
    failure_kind = zeroed or (integrity if blocked_by_integrity else normalized.failure_kind)
    final_diff = evidence.integration.final_state if evidence.integration else prediction.model_patch
    evaluation = Evaluation(
        image={"pinned_ref": spec.pinned_ref, "provenance": spec.image_provenance},
        patch=PatchFacts(prep.patch_status, prep.patch_status == "empty", prep.unusable_reason,
                         _listed(prep.unsafe_paths), _listed(prep.changed_paths), len(prep.changed_paths)),
        protection=Protection(prep.canonical_ref, _listed(prep.restored_paths), _listed(prep.untracked_paths_removed),
                              _listed(prep.hazards_removed), len(prep.hazards_removed), tuple(prep.image_plugins),
                              _listed(outside_scope(prep.changed_paths, spec.single_agent_paths)),
                              _listed(prediction.runner_dropped)),
        integrity=Integrity("integrity_tampering" if tampering else integrity, tuple(tampering[:TAMPERING_LISTED]),
                            tuple(audit_flags(evidence)), normalized.skipped_or_xfailed, normalized.total,
                            evidence.report_problem,
                            {**skip_integrity_record(normalized, baseline),
                             "collected_by_identity": identity_record(normalized, baseline)},
                            review_prediction(prediction), _baseline_record(baseline), tuple(needs_review)),
        evaluator=EvaluatorFacts(evidence.command, evidence.exit_code, evidence.timed_out,
                                 evidence.killed_by_watchdog, evidence.evaluator_seconds, failure_kind,
                                 normalized.synthetic_summary, {k: getattr(normalized, k) for k in SUMMARY_COUNTS},
                                 evidence.attempts, evidence.limits),
        score=_score(graded, zeroed, failure_kind, spec.expected_total),
        dependencies=replace(_dependency_facts(records, metrics, probes_ran),
                             timeline=prediction.timeline.to_json() if prediction.timeline else None,
                             probe_retries=probe_retries(evidence)),
        integration=integration_facts(evidence.integration, prediction),
        sad_proxy=_sad_proxy(spec, final_diff),
        checkpoints=tuple(records),
        build=_build_facts(spec, evidence),
    )
    return PredictionResult(_identity(prediction), evaluation=evaluation, runner_notes=runner_notes(prediction))


ZEROED_SOURCES = {"build_failed": "build_failure", "integrity_tampering": "tampering"}  # else a patch failure


def _score(graded: GradeResult, zeroed: str | None, failure_kind: str | None, expected_total: int | None) -> Score:
    """The graded numbers; a zeroed prediction scores 0 of the expected total whatever its report says."""
    if zeroed is None:
        return Score(graded.final_success, graded.pass_rate, graded.passed, graded.denominator, graded.total_source,
                     graded.outcome)
    source = f"expected_total_due_{ZEROED_SOURCES.get(zeroed, 'patch_failure')}"
    return Score(False, 0.0, 0, expected_total, source, f"model_failure:{failure_kind}")


def _build_facts(spec: TaskSpec, evidence: Evidence) -> BuildFacts | None:
    """The prediction's native builds: the final state's, and every state's count and time; None without a build."""
    if spec.build is None:
        return None
    builds = [*(s.build for s in evidence.states), evidence.build]  # checkpoint order: steps 1, 2, ...
    states = tuple({"step": step, "status": run.status, "seconds": run.seconds, "attempts": run.attempts}
                   for step, run in enumerate(builds, start=1) if run is not None)
    final = evidence.build.to_json() if evidence.build is not None else None
    seconds = sum(run.seconds for run in builds if run is not None)
    return BuildFacts(spec.build.command, final, states, round(seconds, 3))


def probe_retries(evidence: Evidence) -> tuple[dict[str, Any], ...]:
    """Every probe process that ran twice (after a timeout, with twice its limit, or after ambiguous evidence), by
    its state's checkpoint step (the final state's last), so a reader sees what was retried and how it ended."""
    runs = [*(s.probes for s in evidence.states), evidence.probes]  # checkpoint order: steps 1, 2, ...
    return tuple({"step": step, "selectors": list(call.selectors), "attempts": call.attempts,
                  "limits_seconds": list(call.limits), "timed_out": call.timed_out}
                 for step, run in enumerate(runs, start=1) for call in (run.calls if run else ()) if call.attempts > 1)


def _dependency_facts(records: list[dict[str, Any]], metrics: RunMetrics, probes_ran: bool) -> DependencyFacts:
    """The final state's probes and the run's dependency metrics; with probes off, the metrics are not measured.

    Scoring reads unrun probes as failing, which is right when probes were on but could not run (a patch that did
    not apply scores 0 and stays in every mean) and says nothing when no probe was meant to run.
    """
    final = records[-1]
    mode, statuses = final["probe_execution_mode"], {s: r["status"] for s, r in final["probe_test_results"].items()}
    run_metrics_json = _run_metrics_record(metrics)
    if probes_ran:
        return DependencyFacts(mode, statuses,
                               tuple((d.dependency_id, d.final_integrated_pass) for d in metrics.dependencies),
                               metrics.adpr, metrics.final_pass_count, metrics.dependency_count, run_metrics_json,
                               dependency_trace(records))
    unmeasured = {**run_metrics_json, **{k: None for k in _UNMEASURED_RUN_METRICS}}
    unmeasured["dependencies"] = [{**d, **{k: None for k in _UNMEASURED_DEPENDENCY if k in d}}
                                  for d in run_metrics_json.get("dependencies", [])]
    return DependencyFacts(mode, statuses, tuple((d.dependency_id, None) for d in metrics.dependencies), None, None,
                           metrics.dependency_count, unmeasured, {}, UNMEASURED_NOTE)


def _baseline_record(baseline: Baseline | None) -> dict[str, Any] | None:
    """The floor the prediction was held to; `skipped_or_xfailed_ids` is how many node ids the base skipped or
    xfailed, None when the base record predates decision 12 (then only the count rule applied)."""
    if baseline is None:
        return None
    ids, collected, selectors = baseline.skipped_or_xfailed_ids, baseline.collected_ids, baseline.selector_ids
    return {"skipped_or_xfailed": baseline.skipped_or_xfailed, "total": baseline.total, "source": baseline.source,
            "skipped_or_xfailed_ids": None if ids is None else len(ids),
            "collected_ids": None if collected is None else len(collected),
            "selectors_by_id": None if selectors is None else len(selectors)}


def _listed(paths: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """At most PATHS_LISTED paths of a list (a patch of 60,000 files would make every report megabytes long); the
    full lists stay in the prediction's execution.json."""
    return tuple(paths[:PATHS_LISTED])


def integration_facts(integration: Integration | None, prediction: Prediction) -> IntegrationFacts | None:
    """The harness's merges; when it merged nothing because the prediction gave its checkpoints, the runner's
    own record of its merges (the manager protocols' runs), marked as reported."""
    if integration is not None:
        merges = tuple(MergeFacts(m.agent_id, m.merge_status, m.strategy, m.reason, tuple(m.out_of_scope))
                       for m in integration.merges)
    elif prediction.checkpoints and prediction.reported_merges:  # the line's own words: listed as bounded as ours
        merges = tuple(replace(m, out_of_scope=_listed(m.out_of_scope)) for m in prediction.reported_merges)
    else:
        return None
    return IntegrationFacts(prediction.protocol, len(merges), sum(m.merge_status == "conflict" for m in merges),
                            sum(bool(m.out_of_scope) for m in merges), merges,
                            "harness" if integration is not None else "runner")


def _sad_proxy(spec: TaskSpec, final_diff: str) -> SadProxy:
    """The SAD proxy of METRICS 7 (duplicated-contract symbols); a candidate count that needs human audit."""
    candidates = sad_proxy_candidates(spec.dependencies, final_diff)
    enabled = tuple(d.dependency_id for d in spec.dependencies if "SAD" in d.metrics_enabled)
    return SadProxy(enabled, tuple(tuple(c) for c in candidates))


def infrastructure_result(prediction: Prediction, kind: InfrastructureKind, message: str) -> PredictionResult:
    """A prediction the infrastructure could not evaluate: reported, never scored."""
    return PredictionResult(_identity(prediction), failure=InfrastructureFailure(kind, message),
                            runner_notes=runner_notes(prediction))


def runner_notes(prediction: Prediction) -> tuple[str, ...]:
    """What the agent runner's record of the prediction says that the result must report (none without one)."""
    return prediction.runner.notes(asyncodebench.__version__) if prediction.runner is not None else ()


def invalid_run_result(prediction: Prediction) -> PredictionResult | None:
    """The result of a line the agent runner marked invalid (an agent's endpoint failed, METRICS section 9): an
    infrastructure error, never evaluated, kept out of every mean; None for any other line."""
    if prediction.runner is None or prediction.runner.valid:
        return None
    return infrastructure_result(prediction, "agent_run_invalid", "the agent runner marked this line invalid, so it "
                                 "is not a result: " + ("; ".join(prediction.runner.invalid) or "no reason given")
                                 + "; rerun scripts/run_agents.py with the same --run-id to redo the scenario")


def _identity(prediction: Prediction) -> Identity:
    return Identity(prediction.task_id, prediction.protocol, prediction.model, prediction.run_id, prediction.line)


def _run_metrics_record(metrics: RunMetrics) -> dict[str, Any]:
    record = asdict(metrics)
    record["dependencies"] = [asdict(d) for d in metrics.dependencies]
    return record
