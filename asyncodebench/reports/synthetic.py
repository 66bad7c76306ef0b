"""A synthetic report.json of release size (19 tasks x 5 protocols x 3 models, 52 dependency points), for the page
benchmark (scripts/bench_report.py) and the page and comparison tests, which need many cells without running
anything.

The outcomes are random but seeded and internally consistent: every checkpoint trace is made first, and ADPR, DRS,
DRE, CAIL and T are computed from it by the real metrics code (`scoring.dependency.run_metrics`); the report is then
assembled and schema-checked by `report.build_report`, as a real run's is. Nothing here is a measurement.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

from asyncodebench.dataset.protocols import PROTOCOLS
from asyncodebench.reports.report import build_report
from asyncodebench.run.prediction_result import PredictionResult
from asyncodebench.run.predictions import Prediction, PredictionFile
from asyncodebench.scoring.dependency import CheckpointRecord, DependencyOutcome, DependencyPoint, run_metrics

MODELS = ("synth-model-a", "synth-model-b", "synth-model-c")
SKILL = (0.45, 0.6, 0.75)  # chance that a contract holds at the end, by model (in turn)
PROTOCOL_EFFECT = {"single": 0.05, "serial_specialists": 0.0, "async_private": -0.1, "caid_manager": -0.03,
                   "async_manager": 0.02}
DATASET = {"source": "hub", "id": "PhilipZhang/AsynCodeBench", "revision": "v0.4.2",
           "resolved_commit": "0" * 40, "content_sha256": None}


def task_layout(tasks: int, points: int) -> list[dict[str, Any]]:
    """Task ids, their specialists and dependency points: `points` spread as evenly as they go."""
    layout = []
    for t in range(tasks):
        count = points // tasks + (1 if t < points % tasks else 0)
        agents = [f"agent_{k}" for k in range(2 + t % 2)]
        deps = [DependencyPoint(dependency_id=f"synth{t:02d}.{agents[k % len(agents)]}_to_"
                                f"{agents[(k + 1) % len(agents)]}.contract_{k}",
                                producer_agent=agents[k % len(agents)],
                                consumer_agent=agents[(k + 1) % len(agents)], producer_files=(), consumer_files=(),
                                upstream_probe_tests=("u",), downstream_probe_tests=("d",),
                                integrated_probe_tests=("i",),
                                contract_summary=f"Synthetic contract {k} of task {t}: the producer's part must hold "
                                                 "before the consumer's tests can pass.",
                                metrics_enabled=("ADPR", "DRS", "CAIL"))
                for k in range(count)]
        layout.append({"task_id": f"synthetic:task{t:02d}", "agents": agents, "dependencies": deps,
                       "difficulty": (t % 5) * 0.07, "tests": 40 + 15 * (t % 7)})
    return layout


def _steps(protocol: str, agents: list[str]) -> list[tuple[str, str, str | None]]:
    """(checkpoint type, workspace kind, agent) of each checkpoint: the single agent has only the final state; the
    others an artifact and a merge per agent, then the final state (T = 2n + 1)."""
    steps: list[tuple[str, str, str | None]] = []
    if protocol != "single":
        for agent in agents:
            steps += [("agent_artifact", "agent_workspace", agent),
                      ("integration_after_merge", "integrated_workspace", agent)]
    return steps + [("final_integrated", "integrated_workspace", None)]


def _trace(rng: random.Random, steps: list[tuple[str, str, str | None]], agents: list[str],
           point: DependencyPoint, chance: float) -> list[dict[str, Any]]:
    """One dependency's groups over the checkpoints: each side becomes right when its agent's artifact lands (and
    stays right), the contract as a whole holds in integrated states once both sides have landed."""
    side = chance ** 0.5  # so that both sides are right with probability `chance`
    producer_ok, consumer_ok = rng.random() < side, rng.random() < side
    landed = {agent: 2 * i + 1 for i, agent in enumerate(agents)} if len(steps) > 1 else dict.fromkeys(agents, 1)
    regress = len(steps) > 1 and rng.random() < 0.05  # a contract met at a merge and broken by a later one
    trace = []
    for number, (kind, workspace, agent) in enumerate(steps, start=1):
        up = producer_ok and number >= landed[point.producer_agent]
        down = consumer_ok and number >= landed[point.consumer_agent]
        integrated = up and down and workspace == "integrated_workspace"
        if regress and kind == "final_integrated":
            integrated = False
        trace.append({"step": number, "checkpoint_type": kind, "workspace_kind": workspace, "agent_id": agent,
                      "upstream": up, "downstream": down, "integrated": integrated})
    return trace


def _result(rng: random.Random, task: dict[str, Any], model: str, skill: float, protocol: str,
            line: int) -> dict[str, Any]:
    chance = min(0.95, max(0.05, skill + PROTOCOL_EFFECT.get(protocol, 0.0) - task["difficulty"]))
    steps = _steps(protocol, task["agents"])
    trace = {p.dependency_id: _trace(rng, steps, task["agents"], p, chance) for p in task["dependencies"]}
    records = [CheckpointRecord(logical_step=n, checkpoint_type=kind, checkpoint_id=kind if kind == "final_integrated"
                                else f"{kind}:{agent}:{n}", workspace_kind=workspace, recorded_at="",
                                outcomes=tuple(DependencyOutcome(dep_id, t[n - 1]["upstream"], t[n - 1]["downstream"],
                                                                 t[n - 1]["integrated"])
                                               for dep_id, t in trace.items()))
               for n, (kind, workspace, agent) in enumerate(steps, start=1)]
    metrics = run_metrics(records, task["dependencies"])
    total = task["tests"]
    success = metrics.adpr == 1 and rng.random() < 0.8
    passed = total if success else round(total * (0.3 + 0.65 * (metrics.adpr or 0) * rng.uniform(0.8, 1.0)))
    return {
        "status": "evaluated", "task_id": task["task_id"], "protocol": protocol, "model_name_or_path": model,
        "prediction_run_id": None, "line": line, "image": {"pinned_ref": "", "provenance": "official"},
        "outcome": "passed" if success else "failed", "final_success": success, "pass_rate": passed / total,
        "tests_passed": passed, "tests_denominator": total, "denominator_source": "report_total",
        "patch": {"status": "applied", "empty": False, "unsafe_paths": [], "changed_paths": []},
        "evaluator": {"command": [], "exit_code": 0 if success else 1, "timed_out": False,
                      "killed_by_watchdog": False, "seconds": None, "failure_kind": None, "synthetic_summary": False,
                      "summary": {"passed": passed, "failed": total - passed, "errors": 0, "skipped": 0, "xfailed": 0,
                                  "total": total, "collected": total}},
        "protection": {"canonical_ref": None, "hazards_removed": [], "restored_paths": [],
                       "untracked_paths_removed": [], "image_plugins": [], "out_of_scope_paths": []},
        # no review record: these results show review flags as n/a, as one written before review flags does
        "integrity": {"violation": None, "skipped_or_xfailed": 0, "total": total, "report_problem": None,
                      "baseline": None},
        "probes": {"mode": "batch", "statuses": {}}, "dependencies": [],
        "adpr": metrics.adpr, "adpr_numerator": metrics.final_pass_count, "adpr_denominator": metrics.dependency_count,
        "run_metrics": {**asdict(metrics), "dependencies": [asdict(d) for d in metrics.dependencies]},
        "integration": None,
        "sad_proxy": {"label": "synthetic", "dependencies_enabled": [], "candidate_count": 0, "candidates": []},
        "dependency_trace": trace,
    }


def synthetic_report(tasks: int = 19, models: tuple[str, ...] = MODELS, protocols: tuple[str, ...] = PROTOCOLS,
                     points: int = 52, seed: int = 0, infrastructure_errors: int = 2,
                     run_id: str = "synthetic") -> dict[str, Any]:
    """A schema-valid report of `tasks` x `protocols` x `models` predictions; the last `infrastructure_errors`
    predictions are infrastructure errors (so the page shows them apart)."""
    metadata, file, records = synthetic_inputs(tasks, models, protocols, points, seed, infrastructure_errors, run_id)
    return build_report(metadata, file, typed_results(records))


def typed_results(records: list[dict[str, Any]]) -> list[PredictionResult]:
    """The typed results of `synthetic_inputs`' records, as `store.read_results` gives a run's (the report's input)."""
    return [PredictionResult.from_json(record) for record in records]


def synthetic_inputs(tasks: int = 19, models: tuple[str, ...] = MODELS, protocols: tuple[str, ...] = PROTOCOLS,
                     points: int = 52, seed: int = 0, infrastructure_errors: int = 2,
                     run_id: str = "synthetic") -> tuple[dict[str, Any], PredictionFile, list[dict[str, Any]]]:
    """What `synthetic_report` builds its report from (run metadata, predictions file, result records as
    result.json holds them, schema-valid but for `schema_version`), for tests that change the results before the
    report is built (`typed_results`)."""
    rng = random.Random(seed)
    layout = task_layout(tasks, points)
    results: list[dict[str, Any]] = []
    for number, model in enumerate(models):
        for protocol in protocols:
            for task in layout:
                results.append(_result(rng, task, model, SKILL[number % len(SKILL)], protocol, len(results) + 1))
    for result in results[len(results) - infrastructure_errors:]:
        for key in list(result):
            if key not in ("task_id", "protocol", "model_name_or_path", "prediction_run_id", "line"):
                del result[key]
        result.update(status="infrastructure_error",
                      infrastructure_error={"kind": "image_missing", "message": "synthetic: the image was missing"})
    predictions = tuple(Prediction(r["line"], r["task_id"], r["protocol"], r["model_name_or_path"],
                                   r["prediction_run_id"], "", (), {}, {}) for r in results)
    file = PredictionFile(path="synthetic.jsonl", sha256="0" * 64, predictions=predictions, problems=())
    metadata = {
        "run_id": run_id, "tool": {"name": "asyncodebench", "version": "synthetic", "python": "n/a"},
        "dataset": dict(DATASET), "predictions_file": {"path": "synthetic.jsonl", "sha256": "0" * 64},
        "settings": {"run_probes": True, "mode": "synthetic"},
        "images": {t["task_id"]: {"task_id": t["task_id"], "pinned_ref": f"example.invalid/{t['task_id'][10:]}@sha256:"
                                  + "0" * 64, "state": "match"} for t in layout},
        "image_sources": {t["task_id"]: {"pinned_ref": f"example.invalid/{t['task_id'][10:]}@sha256:" + "0" * 64,
                                         "provenance": "official"} for t in layout},
        "dependency_points": {p.dependency_id: {"task_id": t["task_id"], "producer_agent": p.producer_agent,
                                                "consumer_agent": p.consumer_agent,
                                                "contract_summary": p.contract_summary,
                                                "metrics_enabled": list(p.metrics_enabled)}
                              for t in layout for p in t["dependencies"]},
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:00+00:00",
    }
    return metadata, file, results
