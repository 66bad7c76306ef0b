"""The declared `datasets.Features` of each configuration: real lists and structs, never JSON in strings."""

from __future__ import annotations

from datasets import Features, List, Value

STR = Value("string")
INT = Value("int32")
BOOL = Value("bool")
STRINGS = List(STR)

ASSIGNMENT = {
    "agent_id": STR,
    "role": STR,
    "subproblem_id": STR,
    "writable_paths": STRINGS,
    "primary_test_targets": STRINGS,
}

TASK = Features({
    "task_id": STR,
    "source_task_id": STR,
    "repo": STR,
    "repository_url": STR,
    "base_revision": STR,
    "pull_request_url": STR,
    "overlays": List({"path": STR, "sha256": STR}),
    "problem_statement": STR,
    "container_image": STR,
    "container_digest": STR,
    "container_pinned_ref": STR,
    "container_runtime_root": STR,
    "evaluator_command": STRINGS,
    "test_targets": STRINGS,
    "dependency_count": INT,
    "dependency_ids": STRINGS,
    "specialists": List(ASSIGNMENT),
    "single_agent_writable_paths": STRINGS,
    "environment_requirements": STRINGS,
    "expected_test_counts": List({
        "snapshot_id": STR, "evidence_scope": STR, "collected": INT, "passed": INT, "failed": INT,
        "errors": INT, "skipped": INT, "source_ref": STR,
    }),
    "license": STR,
    "license_file": STR,
    "domain": STR,
    "languages": STRINGS,
    "parallelizability": STR,
})

SCENARIO = Features({
    "scenario_id": STR,
    "task_id": STR,
    "protocol": STR,
    "display_name": STR,
    "execution_mode": STR,
    "online": BOOL,
    "agent_count": INT,
    "concurrent_execution": BOOL,
    "communication_condition": STR,
    "source_scenario_id": STR,
    "assignments_source_protocol": STR,
    "assignments": List(ASSIGNMENT),
    "budget": {
        "profile_id": STR, "profile_file": STR, "unit": STR, "manager_max_iterations": INT,
        "subagent_max_iterations": INT, "max_rounds_chat": INT, "max_subagents": STR,
        "manager_max_iterations_total": INT, "manager_max_interventions": INT,
        "manager_max_tokens_total": Value("int64"), "manager_max_active_seconds_per_event": INT,
        "manager_max_active_seconds_total": INT,
    },
})

DEPENDENCY = Features({
    "dependency_id": STR,
    "task_id": STR,
    "type_code": STR,
    "dependency_type": STR,
    "producer_subproblem": STR,
    "consumer_subproblem": STR,
    "producer_agent": STR,
    "consumer_agent": STR,
    "producer_files": STRINGS,
    "consumer_files": STRINGS,
    "contract_summary": STR,
    "upstream_probe_tests": STRINGS,
    "downstream_probe_tests": STRINGS,
    "integrated_probe_tests": STRINGS,
    "metrics_enabled": STRINGS,
    "audit_note": STR,
})

FEATURES = {"tasks": TASK, "scenarios": SCENARIO, "dependencies": DEPENDENCY}
CONFIG_DESCRIPTIONS = {
    "tasks": "19 repository-level coding tasks: prompt, base revision, pinned container, evaluator, ownership.",
    "scenarios": "95 run conditions: each task under each of the five execution protocols.",
    "dependencies": "52 producer-consumer dependency points with upstream, downstream and integrated probe tests.",
}
