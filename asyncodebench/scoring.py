"""Turn the raw evidence of one evaluation into its graded result record (no Docker: rescoring uses it too)."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from asyncodebench.checkpoints import CheckpointContext, build_checkpoint_record, record_to_checkpoint
from asyncodebench.evaluation import Evidence
from asyncodebench.grading import grade, normalize_report
from asyncodebench.metrics import run_metrics
from asyncodebench.predictions import Prediction
from asyncodebench.probes import selector_results
from asyncodebench.spec import TaskSpec

RESULT_SCHEMA_VERSION = "1.0"
PATCH_FAILURE_KINDS = {"failed": "patch_did_not_apply", "unsafe_paths": "patch_unsafe_paths"}


def final_checkpoint(spec: TaskSpec, evidence: Evidence, recorded_at: str, step: int = 1) -> dict[str, Any]:
    """The `final_integrated` checkpoint record (upstream layout) of the evaluated state."""
    results = selector_results(evidence.probes, spec.selectors)
    calls = evidence.probes.calls if evidence.probes else ()
    exit_codes = {
        s: next((c.exit_code for c in reversed(calls) if s in c.selectors), None) for s in spec.selectors
    }
    context = CheckpointContext(
        task_id=spec.task_id, source_task_id=spec.task_id, metric_annotation_id=None, metrics_manifest=None,
        checkpoint_id="final_integrated", checkpoint_type="final_integrated", logical_step=step,
        recorded_at=recorded_at, agent_id=None, task_assignment_id=None, workspace_kind="integrated_workspace",
        workspace_path=spec.workdir, artifact_version=None, visible_upstream_artifact_version=None,
        integrated_workspace_version=evidence.preparation.canonical_ref,
        probe_execution_mode=evidence.probes.mode if evidence.probes else "not_run",
        probe_timeout_seconds=evidence.probes.probe_timeout if evidence.probes else 0, source_build=None,
    )
    output = "\n".join(c.output_tail for c in calls)
    return build_checkpoint_record(context, spec.dependencies, results, exit_codes, output)


def score(spec: TaskSpec, prediction: Prediction, evidence: Evidence, recorded_at: str | None = None) -> dict[str, Any]:
    """The result record of one evaluated prediction."""
    recorded_at = recorded_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    prep = evidence.preparation
    normalized = normalize_report(evidence.report, evidence.exit_code, evidence.output)
    patch_failure = PATCH_FAILURE_KINDS.get(prep.patch_status)
    graded = grade(normalized, evidence.exit_code, spec.expected_total)
    checkpoint = final_checkpoint(spec, evidence, recorded_at)
    metrics = run_metrics([record_to_checkpoint(checkpoint, spec.dependencies)], spec.dependencies)
    failure_kind = patch_failure or normalized.failure_kind
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "status": "evaluated",
        **_identity(prediction),
        "patch": {"status": prep.patch_status, "empty": prep.patch_status == "empty",
                  "unsafe_paths": list(prep.unsafe_paths), "changed_paths": list(prep.changed_paths)},
        "protection": {"canonical_ref": prep.canonical_ref, "restored_paths": list(prep.restored_paths),
                       "untracked_paths_removed": list(prep.untracked_paths_removed),
                       "hazards_removed": list(prep.hazards_removed)},
        "evaluator": {
            "command": list(evidence.command), "exit_code": evidence.exit_code, "timed_out": evidence.timed_out,
            "killed_by_watchdog": evidence.killed_by_watchdog, "seconds": evidence.evaluator_seconds,
            "failure_kind": failure_kind, "synthetic_summary": normalized.synthetic_summary,
            "summary": {k: getattr(normalized, k) for k in ("passed", "failed", "errors", "skipped", "total", "collected")},
        },
        "final_success": graded.final_success and patch_failure is None,
        "pass_rate": 0.0 if patch_failure else graded.pass_rate,
        "tests_passed": 0 if patch_failure else graded.passed,
        "tests_denominator": spec.expected_total if patch_failure else graded.denominator,
        "denominator_source": "expected_total_due_patch_failure" if patch_failure else graded.total_source,
        "outcome": f"model_failure:{failure_kind}" if patch_failure else graded.outcome,
        "probes": {"mode": checkpoint["probe_execution_mode"], "statuses": {
            s: r["status"] for s, r in checkpoint["probe_test_results"].items()}},
        "dependencies": [
            {"dependency_id": d.dependency_id, "integrated_pass": d.final_integrated_pass} for d in metrics.dependencies
        ],
        "adpr": metrics.adpr,
        "adpr_numerator": metrics.final_pass_count,
        "adpr_denominator": metrics.dependency_count,
        "run_metrics": _run_metrics_record(metrics),
        "checkpoint": checkpoint,
    }


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
