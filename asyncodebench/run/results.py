"""Turn the raw evidence of one evaluation into its graded result record (no Docker: rescoring uses it too)."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from asyncodebench.harness.checks import audit_flags, examine_evidence
from asyncodebench.harness.evaluation import Evidence
from asyncodebench.harness.integration import Integration
from asyncodebench.harness.probes import ProbeRun, selector_results
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.run.predictions import Prediction
from asyncodebench.scoring.checkpoints import (
    CheckpointContext,
    build_checkpoint_record,
    record_to_checkpoint,
)
from asyncodebench.scoring.dependency import run_metrics
from asyncodebench.scoring.grading import (
    Baseline,
    grade,
    integrity_failure,
    normalize_report,
    skip_integrity_record,
)
from asyncodebench.scoring.patches import outside_scope
from asyncodebench.scoring.review import review_prediction
from asyncodebench.scoring.sad import sad_proxy_candidates

RESULT_SCHEMA_VERSION = "1.0"
TAMPERING_LISTED = 50  # contradictions kept in a result (each names its process)
PATHS_LISTED = 200  # paths kept per list in a result
PATCH_FAILURE_KINDS = {"failed": "patch_did_not_apply", "unsafe_paths": "patch_unsafe_paths",
                       "unusable": "patch_unusable"}


def checkpoint_record(spec: TaskSpec, probes: ProbeRun | None, step: int, kind: tuple[str, str, str | None],
                      workspace_version: str, recorded_at: str) -> dict[str, Any]:
    """One checkpoint record (upstream layout) of a probed state; `kind` is (type, workspace kind, agent)."""
    checkpoint_type, workspace_kind, agent_id = kind
    results = selector_results(probes, spec.selectors)
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
        probe_timeout_seconds=probes.probe_timeout if probes else 0, source_build=None,
    )
    output = "\n".join(c.output_tail for c in calls)
    return build_checkpoint_record(context, spec.dependencies, results, exit_codes, output)


def checkpoint_records(spec: TaskSpec, evidence: Evidence, recorded_at: str) -> list[dict[str, Any]]:
    """Every checkpoint of the evaluation in write order: intermediate states, then final_integrated."""
    records = [
        checkpoint_record(spec, s.probes, i, (s.checkpoint_type, s.workspace_kind, s.agent_id),
                          s.preparation.canonical_ref, recorded_at)
        for i, s in enumerate(evidence.states, start=1)
    ]
    final_kind = ("final_integrated", "integrated_workspace", None)
    records.append(checkpoint_record(spec, evidence.probes, len(records) + 1, final_kind,
                                     evidence.preparation.canonical_ref, recorded_at))
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
          recorded_at: str | None = None) -> dict[str, Any]:
    """The result record of one evaluated prediction (its checkpoints ride along under `checkpoints`).

    `baseline` is the base state's run in the same image (METRICS decisions 9 and 12), None when not measured.
    `integrity.review` holds the review flags of every patch the prediction carries: shown, never scored.
    """
    recorded_at = recorded_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    evidence, tampering = examine_evidence(evidence)
    audit = audit_flags(evidence)
    prep = evidence.preparation
    normalized = normalize_report(evidence.report, evidence.exit_code, evidence.output)
    patch_failure = PATCH_FAILURE_KINDS.get(prep.patch_status)
    graded = grade(normalized, evidence.exit_code, spec.expected_total, baseline)
    records = checkpoint_records(spec, evidence, recorded_at)
    metrics = run_metrics([record_to_checkpoint(r, spec.dependencies) for r in records], spec.dependencies)
    integrity = integrity_failure(normalized, baseline)
    blocked_by_integrity = integrity is not None and graded.outcome == f"model_failure:{integrity}"
    # Both score 0 against the expected total, whatever the report says: a patch that never reached the code, and
    # a pytest process whose own evidence contradicts itself (decision 11).
    zeroed = patch_failure or ("integrity_tampering" if tampering else None)
    failure_kind = zeroed or (integrity if blocked_by_integrity else normalized.failure_kind)
    final_diff = evidence.integration.final_state if evidence.integration else prediction.model_patch
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "status": "evaluated",
        **_identity(prediction),
        "image": {"pinned_ref": spec.pinned_ref, "provenance": spec.image_provenance},
        "patch": {"status": prep.patch_status, "empty": prep.patch_status == "empty",
                  "unusable_reason": prep.unusable_reason, "unsafe_paths": _listed(prep.unsafe_paths),
                  "changed_paths": _listed(prep.changed_paths), "changed_count": len(prep.changed_paths)},
        "protection": {"canonical_ref": prep.canonical_ref, "restored_paths": _listed(prep.restored_paths),
                       "untracked_paths_removed": _listed(prep.untracked_paths_removed),
                       "hazards_removed": _listed(prep.hazards_removed),
                       "hazards_removed_count": len(prep.hazards_removed), "image_plugins": list(prep.image_plugins),
                       "out_of_scope_paths": _listed(outside_scope(prep.changed_paths, spec.single_agent_paths))},
        "integrity": {"violation": "integrity_tampering" if tampering else integrity,
                      "tampering": tampering[:TAMPERING_LISTED], "audit": audit,
                      "skipped_or_xfailed": normalized.skipped_or_xfailed,
                      "total": normalized.total, "report_problem": evidence.report_problem,
                      **skip_integrity_record(normalized, baseline), "review": review_prediction(prediction),
                      "baseline": _baseline_record(baseline)},
        "evaluator": {
            "command": list(evidence.command), "exit_code": evidence.exit_code, "timed_out": evidence.timed_out,
            "killed_by_watchdog": evidence.killed_by_watchdog, "seconds": evidence.evaluator_seconds,
            "failure_kind": failure_kind, "synthetic_summary": normalized.synthetic_summary,
            "summary": {k: getattr(normalized, k)
                        for k in ("passed", "failed", "errors", "skipped", "xfailed", "total", "collected")},
        },
        "final_success": graded.final_success and zeroed is None,
        "pass_rate": 0.0 if zeroed else graded.pass_rate,
        "tests_passed": 0 if zeroed else graded.passed,
        "tests_denominator": spec.expected_total if zeroed else graded.denominator,
        "denominator_source": (f"expected_total_due_{'patch_failure' if patch_failure else 'tampering'}" if zeroed
                               else graded.total_source),
        "outcome": f"model_failure:{failure_kind}" if zeroed else graded.outcome,
        "probes": {"mode": records[-1]["probe_execution_mode"], "statuses": {
            s: r["status"] for s, r in records[-1]["probe_test_results"].items()}},
        "dependencies": [
            {"dependency_id": d.dependency_id, "integrated_pass": d.final_integrated_pass} for d in metrics.dependencies
        ],
        "adpr": metrics.adpr,
        "adpr_numerator": metrics.final_pass_count,
        "adpr_denominator": metrics.dependency_count,
        "run_metrics": _run_metrics_record(metrics),
        "dependency_trace": dependency_trace(records),
        "integration": _integration_record(evidence.integration),
        "sad_proxy": _sad_proxy(spec, final_diff),
        "checkpoints": records,
    }


def _baseline_record(baseline: Baseline | None) -> dict[str, Any] | None:
    """The floor the prediction was held to; `skipped_or_xfailed_ids` is how many node ids the base skipped or
    xfailed, None when the base record predates decision 12 (then only the count rule applied)."""
    if baseline is None:
        return None
    ids = baseline.skipped_or_xfailed_ids
    return {"skipped_or_xfailed": baseline.skipped_or_xfailed, "total": baseline.total, "source": baseline.source,
            "skipped_or_xfailed_ids": None if ids is None else len(ids)}


def _listed(paths: tuple[str, ...] | list[str]) -> list[str]:
    """At most PATHS_LISTED paths of a list (a patch of 60,000 files would make every report megabytes long); the
    full lists stay in the prediction's execution.json."""
    return list(paths[:PATHS_LISTED])


def _integration_record(integration: Integration | None) -> dict[str, Any] | None:
    if integration is None:
        return None
    return {
        "protocol": integration.protocol, "agents": len(integration.merges),
        "merge_conflicts": integration.conflicts, "scope_violations": integration.scope_violations,
        "merges": [{"agent_id": m.agent_id, "merge_status": m.merge_status, "strategy": m.strategy,
                    "reason": m.reason, "out_of_scope": list(m.out_of_scope)} for m in integration.merges],
    }


def _sad_proxy(spec: TaskSpec, final_diff: str) -> dict[str, Any]:
    """The SAD proxy of METRICS 7 (duplicated-contract symbols); a candidate count that needs human audit."""
    candidates = sad_proxy_candidates(spec.dependencies, final_diff)
    enabled = [d.dependency_id for d in spec.dependencies if "SAD" in d.metrics_enabled]
    return {"label": "proxy: candidates for human audit, not strict SAD", "dependencies_enabled": enabled,
            "candidate_count": len(candidates), "candidates": [list(c) for c in candidates]}


def infrastructure_result(prediction: Prediction, kind: str, message: str) -> dict[str, Any]:
    """A prediction the infrastructure could not evaluate: reported, never scored."""
    return {"schema_version": RESULT_SCHEMA_VERSION, "status": "infrastructure_error", **_identity(prediction),
            "infrastructure_error": {"kind": kind, "message": message}}


def _identity(prediction: Prediction) -> dict[str, Any]:
    return {"task_id": prediction.task_id, "protocol": prediction.protocol, "model_name_or_path": prediction.model,
            "prediction_run_id": prediction.run_id, "line": prediction.line}


def _run_metrics_record(metrics: Any) -> dict[str, Any]:
    record = asdict(metrics)
    record["dependencies"] = [asdict(d) for d in metrics.dependencies]
    return record
