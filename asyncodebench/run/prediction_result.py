"""The result of one prediction as types: what `result.json` holds, made once and never edited afterwards.

A `PredictionResult` is either evaluated (it carries an `Evaluation`, built from its parts) or an infrastructure
failure (it carries an `InfrastructureFailure`, never scored). `to_json` writes exactly the JSON the kit has always
written, key for key and in the same order, so every saved run stays readable; `from_json` reads it back. The JSON
is described by `schemas/result.schema.json`, and the run folder checks every result against it as it writes.

Records made elsewhere in an upstream layout (the checkpoint records, the per-dependency run metrics, the review
flags) are kept as the JSON values they already are: their own modules define them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from asyncodebench.scoring.trust import Trust, trust_of

JsonObject = Mapping[str, Any]
RESULT_SCHEMA_VERSION = "1.0"

Status = Literal["evaluated", "infrastructure_error"]
InfrastructureKind = Literal[
    "image_missing",  # the pinned image is not on the daemon (run with --pull)
    "image_mismatch",  # an image of that name is there, with another digest
    "image_unreachable",  # the daemon failed while the image was looked up or pulled
    "docker_unavailable",  # no Docker daemon answered
    "sandbox_unavailable",  # the daemon failed to create, run or stop a container (tried again, TRIES in all)
    "overlay_missing",  # the task's overlay patches could not be fetched or verified
    "baseline_unavailable",  # the base state could not be measured, so no floor exists to grade against
    "harness_error",  # the kit's own code failed (a bug: reported, never a model failure)
    "ray_unavailable",  # no Ray cluster at the address given
    "ray_no_node",  # no live node of the cluster could take the work
    "node_lost",  # Ray lost the attempt with its worker or node
    "kit_mismatch",  # a Ray node has other kit code than the driver, so it refused to grade
    "interrupted",  # the run was stopped (Ctrl-C) before the work could run
    "agent_run_invalid",  # the agent runner marked the line invalid: an agent's model endpoint failed (METRICS 9)
]
INFRASTRUCTURE_KINDS: tuple[str, ...] = get_args(InfrastructureKind)


@dataclass(frozen=True)
class Identity:
    """Which prediction this is: the key of its line in the predictions file."""

    task_id: str
    protocol: str
    model_name_or_path: str
    prediction_run_id: str | None
    line: int  # 1-based line of the predictions file

    def to_json(self) -> dict[str, Any]:
        """The identity's keys, at the top level of `result.json`."""
        return {"task_id": self.task_id, "protocol": self.protocol, "model_name_or_path": self.model_name_or_path,
                "prediction_run_id": self.prediction_run_id, "line": self.line}

    @classmethod
    def from_json(cls, value: JsonObject) -> Identity:
        """Read back what `to_json` wrote (from a whole `result.json` object)."""
        return cls(value["task_id"], value["protocol"], value["model_name_or_path"], value["prediction_run_id"],
                   value["line"])


@dataclass(frozen=True)
class InfrastructureFailure:
    """Why the infrastructure could not evaluate a prediction: reported with the run, kept out of every mean."""

    kind: InfrastructureKind
    message: str

    def __post_init__(self) -> None:
        if self.kind not in INFRASTRUCTURE_KINDS:
            raise ValueError(f"unknown infrastructure error kind {self.kind!r}; "
                             f"known: {', '.join(INFRASTRUCTURE_KINDS)}")

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `infrastructure_error` object."""
        return {"kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class PatchFacts:
    """What became of the predicted patch in the work tree."""

    status: str  # applied | empty | failed | unsafe_paths | unusable
    empty: bool
    unusable_reason: str | None  # why a patch made the tree unusable (status `unusable`)
    unsafe_paths: tuple[str, ...]  # at most PATHS_LISTED of each list; the full lists stay in execution.json
    changed_paths: tuple[str, ...]
    changed_count: int  # every changed path, listed or not

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `patch` object."""
        return {"status": self.status, "empty": self.empty, "unusable_reason": self.unusable_reason,
                "unsafe_paths": list(self.unsafe_paths), "changed_paths": list(self.changed_paths),
                "changed_count": self.changed_count}

    @classmethod
    def from_json(cls, value: JsonObject) -> PatchFacts:
        """Read back the `patch` object; an older one without `changed_count` counts its listed paths."""
        return cls(value["status"], value["empty"], value.get("unusable_reason"), tuple(value["unsafe_paths"]),
                   tuple(value["changed_paths"]), value.get("changed_count", len(value["changed_paths"])))


@dataclass(frozen=True)
class Protection:
    """What the preparation restored or removed so that the patch cannot change how it is graded."""

    canonical_ref: str | None  # the commit the prepared tree was recorded as
    restored_paths: tuple[str, ...]  # test targets put back to their base bytes
    untracked_paths_removed: tuple[str, ...]
    hazards_removed: tuple[str, ...]  # files that would change how pytest or git behave (conftest, .gitattributes ...)
    hazards_removed_count: int
    image_plugins: tuple[str, ...]  # pytest plugins the image itself provides
    out_of_scope_paths: tuple[str, ...]  # changed paths outside the task's writable paths
    dropped_by_runner: tuple[str, ...] = ()  # paths the agent runner says it left out of the patches (its record)

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `protection` object."""
        return {"canonical_ref": self.canonical_ref, "restored_paths": list(self.restored_paths),
                "untracked_paths_removed": list(self.untracked_paths_removed),
                "hazards_removed": list(self.hazards_removed), "hazards_removed_count": self.hazards_removed_count,
                "image_plugins": list(self.image_plugins), "out_of_scope_paths": list(self.out_of_scope_paths),
                "dropped_by_runner": list(self.dropped_by_runner)}

    @classmethod
    def from_json(cls, value: JsonObject) -> Protection:
        """Read back the `protection` object; an older one without a count counts its listed hazards, one without
        out-of-scope or dropped paths had none."""
        hazards = tuple(value["hazards_removed"])
        return cls(value["canonical_ref"], tuple(value["restored_paths"]), tuple(value["untracked_paths_removed"]),
                   hazards, value.get("hazards_removed_count", len(hazards)), tuple(value["image_plugins"]),
                   tuple(value.get("out_of_scope_paths") or ()), tuple(value.get("dropped_by_runner") or ()))


@dataclass(frozen=True)
class Integrity:
    """Whether the evidence can be believed (METRICS decisions 9, 11 and 12), and what is only shown for review."""

    violation: str | None  # integrity_tampering | a broken skip or collection rule | None
    tampering: tuple[JsonObject, ...]  # {process, reason}: contradictions found, each zeroes the score
    audit: tuple[JsonObject, ...]  # {process, event}: what the launcher's audit saw; flagged, never scored
    skipped_or_xfailed: int
    total: int
    report_problem: str | None  # why the evaluator's report could not be read, if it could not
    # `skip_rules_broken` and `newly_skipped` (`grading.skip_integrity_record`), and `collected_by_identity`
    # (`grading.identity_record`, decision 14)
    skip_rules: JsonObject
    review: JsonObject | None  # review flags of every patch (`scoring.review`); None: the result predates them
    baseline: JsonObject | None  # the floor the prediction was held to; None when the base was not measured
    # {process, reason}: what a loaded machine could also have caused, left after a second run of the process
    # (`harness.checks.evidence_needs_review`); never scored, the result is only as good as its review
    needs_review: tuple[JsonObject, ...] = ()
    # the monitor model's verdict (`agents.monitor`), None when no monitor read the prediction: shown, never scored
    monitor: JsonObject | None = None

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `integrity` object, the skip rules' keys among its own."""
        return {"violation": self.violation, "tampering": [dict(t) for t in self.tampering],
                "needs_review": [dict(n) for n in self.needs_review],
                "audit": [dict(a) for a in self.audit], "skipped_or_xfailed": self.skipped_or_xfailed,
                "total": self.total, "report_problem": self.report_problem, **self.skip_rules,
                **({"review": self.review} if self.review is not None else {}), "baseline": self.baseline,
                **({"monitor": self.monitor} if self.monitor is not None else {})}

    @classmethod
    def from_json(cls, value: JsonObject) -> Integrity:
        """Read back the `integrity` object; one from before kit 0.4.2 found no tampering or audit flags, and was not
        read for review flags (`review` None: reports show n/a, not 0)."""
        skip_rules = {k: value[k] for k in ("skip_rules_broken", "newly_skipped", "collected_by_identity")
                      if k in value}
        # tampering, audit and review came with kit 0.4.2; an older result found nothing of the kind
        return cls(value["violation"], tuple(value.get("tampering", ())), tuple(value.get("audit", ())),
                   value["skipped_or_xfailed"], value["total"], value["report_problem"], skip_rules,
                   value.get("review"), value["baseline"],
                   tuple(value.get("needs_review", ())), value.get("monitor"))


@dataclass(frozen=True)
class EvaluatorFacts:
    """The task's own evaluator command as it ran on the prepared tree."""

    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    killed_by_watchdog: bool
    seconds: float | None
    failure_kind: str | None  # why the tests did not all pass, as far as the evidence says
    synthetic_summary: bool  # the counts come from the output or the exit code, not from a report
    summary: Mapping[str, int]  # passed, failed, errors, skipped, xfailed, total, collected
    attempts: int = 1  # runs of the evaluator: a second one after a timeout or ambiguous evidence (harness/retry.py)
    limits_seconds: tuple[int, ...] = ()  # its wall-clock limit in each run; empty when it never ran

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `evaluator` object."""
        return {"command": list(self.command), "exit_code": self.exit_code, "timed_out": self.timed_out,
                "killed_by_watchdog": self.killed_by_watchdog, "seconds": self.seconds,
                "failure_kind": self.failure_kind, "synthetic_summary": self.synthetic_summary,
                "summary": dict(self.summary), "attempts": self.attempts, "limits_seconds": list(self.limits_seconds)}

    @classmethod
    def from_json(cls, value: JsonObject) -> EvaluatorFacts:
        """Read back the `evaluator` object (results from before the retry record one run and no limits)."""
        return cls(tuple(value["command"]), value["exit_code"], value["timed_out"], value["killed_by_watchdog"],
                   value["seconds"], value["failure_kind"], value["synthetic_summary"], value["summary"],
                   value.get("attempts", 1), tuple(value.get("limits_seconds", ())))


@dataclass(frozen=True)
class Score:
    """The graded numbers (METRICS decisions 1 to 3): what every mean of the report is made of."""

    final_success: bool
    pass_rate: float
    tests_passed: int
    tests_denominator: int | None  # None only for a zeroed prediction of a task without an expected total
    denominator_source: str
    outcome: str  # passed | model_failure:<kind>

    def to_json(self) -> dict[str, Any]:
        """The score's keys, at the top level of `result.json`."""
        return {"final_success": self.final_success, "pass_rate": self.pass_rate, "tests_passed": self.tests_passed,
                "tests_denominator": self.tests_denominator, "denominator_source": self.denominator_source,
                "outcome": self.outcome}

    @classmethod
    def from_json(cls, value: JsonObject) -> Score:
        """Read back the score's keys (from a whole `result.json` object)."""
        return cls(value["final_success"], value["pass_rate"], value["tests_passed"], value["tests_denominator"],
                   value["denominator_source"], value["outcome"])


@dataclass(frozen=True)
class DependencyFacts:
    """The dependency probes of the final state and the dependency metrics of the whole run (METRICS 4 to 6).

    With probes off nothing was measured: the measured values are null and `not_measured` says why, so reports
    leave them out of every mean instead of counting zeros and T+1 penalties.
    """

    probe_mode: str  # batch | per_selector | not_run
    probe_statuses: Mapping[str, str]  # final state's status per probe selector
    integrated_pass: tuple[tuple[str, bool | None], ...]  # (dependency id, its integrated group passes at the end)
    adpr: float | None
    adpr_numerator: int | None
    adpr_denominator: int
    run_metrics: JsonObject  # `RunMetrics` as JSON, unmeasured values null
    trace: Mapping[str, Sequence[JsonObject]]  # per dependency, which probe group passed at which step
    not_measured: str | None = None
    # where the checkpoint timeline comes from (`scoring.provenance.Timeline`); None: no multi-agent timeline
    timeline: JsonObject | None = None
    # every probe process of any state that ran twice (harness/retry.py): step, selectors, attempts, limits_seconds,
    # timed_out (its last run)
    probe_retries: tuple[JsonObject, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The probe and dependency keys, at the top level of `result.json` (`metrics_not_measured` aside)."""
        return {"probes": {"mode": self.probe_mode, "statuses": dict(self.probe_statuses),
                           "retried": [dict(r) for r in self.probe_retries]},
                "dependencies": [{"dependency_id": d, "integrated_pass": passed} for d, passed in self.integrated_pass],
                "adpr": self.adpr, "adpr_numerator": self.adpr_numerator, "adpr_denominator": self.adpr_denominator,
                "run_metrics": self.run_metrics, "dependency_trace": self.trace,
                **({"timeline": self.timeline} if self.timeline is not None else {})}

    @classmethod
    def from_json(cls, value: JsonObject) -> DependencyFacts:
        """Read back the probe and dependency keys (from a whole `result.json` object)."""
        return cls(value["probes"]["mode"], value["probes"]["statuses"],
                   tuple((d["dependency_id"], d["integrated_pass"]) for d in value["dependencies"]), value["adpr"],
                   value["adpr_numerator"], value["adpr_denominator"], value["run_metrics"],
                   value["dependency_trace"], value.get("metrics_not_measured"), value.get("timeline"),
                   tuple(value["probes"].get("retried", ())))


@dataclass(frozen=True)
class MergeFacts:
    """One agent's patch merged into the integrated workspace."""

    agent_id: str
    merge_status: str
    strategy: str | None
    reason: str | None  # scope_violation | merge_conflict | patch_did_not_apply | no patch from this agent
    out_of_scope: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """One entry of the `integration` object's `merges`."""
        return {"agent_id": self.agent_id, "merge_status": self.merge_status, "strategy": self.strategy,
                "reason": self.reason, "out_of_scope": list(self.out_of_scope)}


IntegrationSource = Literal["harness", "runner"]


@dataclass(frozen=True)
class IntegrationFacts:
    """How the agents' patches were merged: by the harness (integrated protocols given `agent_patches`), or as the
    agent runner reported it (predictions giving their own checkpoints; shown, never scored)."""

    protocol: str
    agents: int
    merge_conflicts: int
    scope_violations: int
    merges: tuple[MergeFacts, ...]
    source: IntegrationSource = "harness"

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `integration` object."""
        return {"protocol": self.protocol, "agents": self.agents, "merge_conflicts": self.merge_conflicts,
                "scope_violations": self.scope_violations, "merges": [m.to_json() for m in self.merges],
                "source": self.source}

    @classmethod
    def from_json(cls, value: JsonObject | None) -> IntegrationFacts | None:
        """Read back the `integration` object; null (nothing was integrated) gives None."""
        if value is None:
            return None
        merges = tuple(MergeFacts(m["agent_id"], m["merge_status"], m["strategy"], m["reason"],
                                  tuple(m["out_of_scope"])) for m in value["merges"])
        # older results have no source: the harness merged
        source: IntegrationSource = "runner" if value.get("source") == "runner" else "harness"
        return cls(value["protocol"], value["agents"], value["merge_conflicts"], value["scope_violations"], merges,
                   source)


@dataclass(frozen=True)
class SadProxy:
    """Candidates for the SAD metric (METRICS 7): symbols of a contract defined twice; a human audits them."""

    dependencies_enabled: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...]
    label: str = "proxy: candidates for human audit, not strict SAD"

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `sad_proxy` object, with the number of candidates."""
        return {"label": self.label, "dependencies_enabled": list(self.dependencies_enabled),
                "candidate_count": len(self.candidates), "candidates": [list(c) for c in self.candidates]}

    @classmethod
    def from_json(cls, value: JsonObject) -> SadProxy:
        """Read back the `sad_proxy` object."""
        return cls(tuple(value["dependencies_enabled"]), tuple(tuple(c) for c in value["candidates"]), value["label"])


@dataclass(frozen=True)
class BuildFacts:
    """The native builds of a prediction of a task that has one (METRICS decision 13)."""

    command: tuple[str, ...]
    final: JsonObject | None  # the final state's build record (`native.BuildRun.to_json`); None: nothing was built
    states: tuple[JsonObject, ...]  # every build in checkpoint order (final last): step, status, seconds
    seconds: float  # all of them

    @property
    def states_built(self) -> int:
        """Builds run for this prediction: one per evaluated state whose patch reached the code."""
        return len(self.states)

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `build` object."""
        return {"command": list(self.command), "final": self.final, "states_built": self.states_built,
                "states": [dict(s) for s in self.states], "seconds": self.seconds}

    @classmethod
    def from_json(cls, value: JsonObject | None) -> BuildFacts | None:
        """Read back the `build` object (absent for a task without a native build)."""
        if value is None:
            return None
        return cls(tuple(value["command"]), value["final"], tuple(value["states"]), value["seconds"])


@dataclass(frozen=True)
class Evaluation:
    """Everything an evaluated prediction's result says, by part."""

    image: JsonObject  # pinned_ref and provenance of the image the prediction ran in
    patch: PatchFacts
    protection: Protection
    integrity: Integrity
    evaluator: EvaluatorFacts
    score: Score
    dependencies: DependencyFacts
    integration: IntegrationFacts | None
    sad_proxy: SadProxy
    checkpoints: tuple[JsonObject, ...] = ()  # upstream-layout records; written beside result.json, not in it
    build: BuildFacts | None = None  # the native builds, for a task that has them


@dataclass(frozen=True)
class RunnerFacts:
    """What evaluate.py checks of the agent runner's record (`runner` of a line, scripts/run_agents.py's): whether
    the runner found the scenario valid (and why not: each agent with an invalid termination, METRICS section 9),
    where its budget came from, and which kit version ran it."""

    valid: bool
    invalid: tuple[str, ...]
    budget_override: int | None
    kit_version: str | None

    @classmethod
    def from_line(cls, runner: Any) -> RunnerFacts | None:
        """The facts of a line's `runner` object, None when the line has none (a prediction not made by the kit)."""
        if not isinstance(runner, Mapping):
            return None
        invalid = tuple(f"{r.get('agent_id')}: {r.get('termination_reason')} ({str(r.get('detail') or '')[:300]})"
                        for r in runner.get("invalid") or () if isinstance(r, Mapping))
        budget = runner.get("budget")
        budget = budget if isinstance(budget, Mapping) else {}
        override = budget.get("per_agent_run") if budget.get("source") == "--budget" else None
        kit = runner.get("kit_version")
        return cls(runner.get("valid") is not False, invalid, override if isinstance(override, int) else None,
                   kit if isinstance(kit, str) else None)

    def notes(self, kit_version: str) -> tuple[str, ...]:
        """What the report says of the record: an invalid run, a budget override, another kit version."""
        notes = []
        if not self.valid:
            notes.append("invalid agent run (not a result): " + ("; ".join(self.invalid) or "marked invalid"))
        if self.budget_override is not None:
            notes.append(f"budget overridden: {self.budget_override} model responses per agent run (--budget), not "
                         "the scenario row's")
        if self.kit_version is not None and self.kit_version != kit_version:
            notes.append(f"run by the agent runner of kit {self.kit_version}, evaluated with kit {kit_version}")
        return tuple(notes)


@dataclass(frozen=True)
class PredictionResult:
    """One prediction's result: evaluated (`evaluation`) or not, for a cause outside the model (`failure`).
    `runner_notes`: what the agent runner's record of the line says that a reader must know (`RunnerFacts.notes`)."""

    identity: Identity
    evaluation: Evaluation | None = None
    failure: InfrastructureFailure | None = None
    runner_notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.evaluation is None) == (self.failure is None):
            raise ValueError("a prediction result has either an evaluation or an infrastructure failure")

    @property
    def status(self) -> Status:
        """`evaluated`, or `infrastructure_error` when there is no evaluation."""
        return "evaluated" if self.evaluation is not None else "infrastructure_error"

    @property
    def checkpoints(self) -> tuple[JsonObject, ...]:
        """The checkpoint records of the evaluation; none for an infrastructure failure."""
        return self.evaluation.checkpoints if self.evaluation is not None else ()

    @property
    def trust(self) -> Trust | None:
        """Whether the result can be published as it is (`scoring.trust`), derived from its integrity record, so an
        older result gets one too; None for an infrastructure failure."""
        return trust_of(self.evaluation.integrity.to_json()) if self.evaluation is not None else None

    def with_failure_message(self, message: str) -> PredictionResult:
        """The same infrastructure failure told with another message (every attempt's failure, after retries)."""
        if self.failure is None:
            raise ValueError("only an infrastructure failure has a message")
        return replace(self, failure=replace(self.failure, message=message))

    def to_json(self) -> dict[str, Any]:
        """The `result.json` object (checkpoints excluded: they go to their own file)."""
        head = {"schema_version": RESULT_SCHEMA_VERSION, "status": self.status, **self.identity.to_json()}
        notes = {"runner_notes": list(self.runner_notes)} if self.runner_notes else {}
        if self.failure is not None:
            return {**head, "infrastructure_error": self.failure.to_json(), **notes}
        e = self.evaluation
        assert e is not None
        record = {**head, "image": e.image, "patch": e.patch.to_json(), "protection": e.protection.to_json(),
                  "integrity": e.integrity.to_json(), "trust": trust_of(e.integrity.to_json()).to_json(),
                  "evaluator": e.evaluator.to_json(), **e.score.to_json(),
                  **e.dependencies.to_json(),
                  "integration": e.integration.to_json() if e.integration else None,
                  "sad_proxy": e.sad_proxy.to_json()}
        if e.dependencies.not_measured is not None:
            record["metrics_not_measured"] = e.dependencies.not_measured
        if e.build is not None:
            record["build"] = e.build.to_json()
        return {**record, **notes}

    @classmethod
    def from_json(cls, value: JsonObject, checkpoints: Sequence[JsonObject] = ()) -> PredictionResult:
        """Read a `result.json` object (and its checkpoint records) back.

        Raises:
            ValueError: the object is neither an evaluated result nor an infrastructure failure.
            KeyError: a part lacks one of its fields.
        """
        identity = Identity.from_json(value)
        notes = tuple(value.get("runner_notes") or ())
        if value.get("status") == "infrastructure_error":
            error = value["infrastructure_error"]
            return cls(identity, failure=InfrastructureFailure(error["kind"], error["message"]), runner_notes=notes)
        if value.get("status") != "evaluated":
            raise ValueError(f"unknown result status {value.get('status')!r}")
        image = value["image"]  # an image record from before provenance existed was the official image
        evaluation = Evaluation(
            image=image if "provenance" in image else {**image, "provenance": "official"},
            patch=PatchFacts.from_json(value["patch"]),
            protection=Protection.from_json(value["protection"]), integrity=Integrity.from_json(value["integrity"]),
            evaluator=EvaluatorFacts.from_json(value["evaluator"]), score=Score.from_json(value),
            dependencies=DependencyFacts.from_json(value), integration=IntegrationFacts.from_json(value["integration"]),
            sad_proxy=SadProxy.from_json(value["sad_proxy"]), checkpoints=tuple(checkpoints),
            build=BuildFacts.from_json(value.get("build")))
        return cls(identity, evaluation=evaluation, runner_notes=notes)
