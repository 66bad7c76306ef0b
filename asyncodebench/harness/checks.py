"""The tampering checks and the audit applied to every pytest process of a state's evidence (METRICS decision 11).

`scoring.tampering` judges one process's report; this module walks the evaluator and every probe process of the
final state and of each checkpoint state, and returns the evidence as grading reads it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from asyncodebench.harness.evaluation import Evidence
from asyncodebench.harness.probes import ProbeCall, ProbeRun
from asyncodebench.scoring.tampering import AUDIT_LISTED, SelfCheck, audit_events, examine


def _probe_check(call: ProbeCall) -> SelfCheck:
    report: dict[str, Any] = {"summary": call.summary, "tests": list(call.tests)}
    return examine(report if call.summary is not None else None, call.exit_code, call.output_tail, call.sentinel,
                   call.failed_collectors, call.output_capped)


def _evaluator_check(evidence: Evidence) -> SelfCheck:
    return examine(evidence.report, evidence.exit_code, evidence.output, evidence.sentinel,
                   output_capped=evidence.output_capped)


def _probe_process(where: str, call: ProbeCall) -> str:
    return f"{where} probes {', '.join(call.selectors)[:200]}"


def examine_probes(run: ProbeRun | None, where: str) -> tuple[ProbeRun | None, list[dict[str, str]]]:
    """A state's probe run with the sentinels taken out, and what contradicts itself in each of its processes.

    The tests of a process whose evidence contradicts itself count as not passed (METRICS decision 11): their
    outcome becomes `tampered`, which no probe selector reads as passed. A process stopped before its session
    ended whose report disagrees with itself keeps no test (its report is not read; `evidence_needs_review`).
    """
    if run is None:
        return None, []
    calls, found = [], []
    for call in run.calls:
        check = _probe_check(call)
        if check.report is None and check.ambiguous:
            tests: tuple[dict[str, Any], ...] = ()
        else:
            tests = tuple(check.report["tests"]) if check.report is not None else call.tests
        if check.tampering:
            tests = tuple({**t, "outcome": "tampered"} for t in tests)
            found += [{"process": _probe_process(where, call), "reason": reason} for reason in check.tampering]
        calls.append(replace(call, tests=tests))
    return replace(run, calls=tuple(calls)), found


def examine_evidence(evidence: Evidence) -> tuple[Evidence, list[dict[str, str]]]:
    """The evidence as grading reads it (sentinels out, exit codes as pytest would give them without them, the
    tests of contradicting probe processes not passed), and every contradiction found, per process."""
    check = _evaluator_check(evidence)
    found = [{"process": "evaluator", "reason": reason} for reason in check.tampering]
    probes, final_found = examine_probes(evidence.probes, "final state")
    states = []
    for step, state in enumerate(evidence.states, start=1):
        state_probes, state_found = examine_probes(state.probes, f"state {step} ({state.checkpoint_type})")
        states.append(replace(state, probes=state_probes))
        found += state_found
    clean = replace(evidence, report=check.report, exit_code=check.exit_code, probes=probes, states=tuple(states))
    if check.report is None and check.ambiguous:  # read as a missing report, as the process left none of its own
        clean = replace(clean, report_problem="stopped_before_its_end")
    return clean, found + final_found


def evidence_needs_review(evidence: Evidence) -> list[dict[str, str]]:
    """What a loaded machine could also have caused, per process (`scoring.tampering`'s ambiguous findings): left
    after the harness ran the process once more, never scored as tampering; `integrity.needs_review`."""
    found = [{"process": "evaluator", "reason": _attempts(reason, evidence.attempts)}
             for reason in _evaluator_check(evidence).ambiguous]
    runs = [("final state", evidence.probes)] + [(f"state {step} ({state.checkpoint_type})", state.probes)
                                                 for step, state in enumerate(evidence.states, start=1)]
    for where, run in runs:
        for call in run.calls if run else ():
            found += [{"process": _probe_process(where, call), "reason": _attempts(reason, call.attempts)}
                      for reason in _probe_check(call).ambiguous]
    return found[:AUDIT_LISTED]


def _attempts(reason: str, attempts: int) -> str:
    return f"{reason} (in each of {attempts} runs)" if attempts > 1 else reason


def audit_flags(evidence: Evidence) -> list[dict[str, str]]:
    """What the launcher's audit hook saw code of the work tree do, per process: flags for review, never a score.

    Only lines carrying the process's own secret count; the probe processes keep only their output's tail."""
    found = [{"process": "evaluator", "event": e} for e in audit_events(evidence.output, evidence.sentinel)]
    runs = [("final state", evidence.probes)] + [(f"state {step} ({state.checkpoint_type})", state.probes)
                                                 for step, state in enumerate(evidence.states, start=1)]
    for where, run in runs:
        for call in run.calls if run else ():
            found += [{"process": f"{where} probes", "event": e} for e in audit_events(call.output_tail, call.sentinel)]
    return list({(f["process"], f["event"]): f for f in found}.values())[:AUDIT_LISTED]
