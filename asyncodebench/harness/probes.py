"""Run a task's dependency probes on the current workspace, and read each selector's status from the runs.

The official method runs one pytest process per selector. Here all selectors run in one process, and a selector
is run alone only when the shared run cannot stand for it: the process ended abnormally (usage error such as an
unknown node id, internal error, interruption, a timeout, no report), or the selector's tests took so long that
alone they would have hit the per-selector limit. Statuses are therefore the per-selector ones (METRICS 0.1,
decision 8); tests/test_probe_equivalence.py proves it on real containers. Each pytest process runs through
`execute`, which gives it a fresh container holding the state, so no process sees what another one left.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from asyncodebench.harness.workspace import PytestRun, stopped_by_timeout
from asyncodebench.scoring.grading import SelectorResult, failed_collectors, node_matches, selector_status
from asyncodebench.scoring.tampering import terminal_counts

Execute = Callable[[tuple[str, ...]], Optional[PytestRun]]  # one pytest process over some selectors

NORMAL_EXIT_CODES = (0, 1)  # tests ran; some may have failed
OUTPUT_TAIL_CHARS = 4000  # of each probe process's output, kept for the consistency checks
DURATION_MARGIN_SECONDS = 5
ALONE_AT_ONCE = 2  # selectors run alone (each in its own container) at the same time


@dataclass(frozen=True)
class ProbeCall:
    """One pytest process over some selectors: its exit code and the per-node outcomes of its report."""

    selectors: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    tests: tuple[dict[str, Any], ...]  # {nodeid, outcome, duration}
    report_found: bool
    output_tail: str
    summary: dict[str, Any] | None = None  # the report's own summary, for the consistency checks
    failed_collectors: int = 0  # collection errors the report lists (pytest's terminal counts them as errors)
    sentinel: str | None = None  # the process's sentinel secret (scoring/tampering.py)
    # The kept tail is not the whole output: the harness capped it, or pytest's summary line is in the output but
    # more than OUTPUT_TAIL_CHARS before its end (pushed out by what the process printed after it).
    output_capped: bool = False
    attempts: int = 1  # runs of this process (PytestRun.attempts)
    limits: tuple[int, ...] = ()  # its wall-clock limit (seconds) in each run (PytestRun.limits)

    @property
    def normal(self) -> bool:
        """Whether the process ended normally: a report, no timeout, and exit code 0 or 1 (tests ran)."""
        return self.report_found and not self.timed_out and self.exit_code in NORMAL_EXIT_CODES


@dataclass(frozen=True)
class ProbeRun:
    """All probe processes of one workspace state: a shared run, then any selectors run alone."""

    mode: str  # "batch", "batch+per_selector" or "per_selector"
    calls: tuple[ProbeCall, ...]
    probe_timeout: int


def run_probes(execute: Execute, selectors: Sequence[str], probe_timeout: int) -> ProbeRun | None:
    """Probe every selector; None when the state could not be prepared for evaluated code (unusable patch)."""
    selectors = tuple(selectors)
    if not selectors:
        return ProbeRun("batch", (), probe_timeout)
    first = execute(selectors)
    if first is None:
        return None
    batch = _call(selectors, first, probe_timeout)
    alone = selectors if not batch.normal else slow_selectors(batch, probe_timeout)
    with ThreadPoolExecutor(max_workers=ALONE_AT_ONCE) as pool:
        runs = list(pool.map(lambda s: execute((s,)), alone))
    calls = [batch] + [_call((s,), run, probe_timeout) for s, run in zip(alone, runs)]
    mode = "batch" if not alone else ("per_selector" if not batch.normal else "batch+per_selector")
    return ProbeRun(mode, tuple(calls), probe_timeout)


def _call(selectors: tuple[str, ...], run: PytestRun | None, timeout: int) -> ProbeCall:
    if run is None:  # cannot happen after a usable first call (same patch, same preparation); kept explicit
        return ProbeCall(selectors, None, False, (), False, "")
    timed_out = (run.killed_by_watchdog or run.exit_code == -1
                 or stopped_by_timeout(run.exit_code, run.seconds, run.limits[-1] if run.limits else timeout))
    report = run.report or {}
    tests = tuple(read_node(t) for t in report.get("tests") or [] if isinstance(t, dict))
    summary = report.get("summary")
    tail = run.tail[-OUTPUT_TAIL_CHARS:]
    pushed_out = len(tail) < len(run.tail) and terminal_counts(tail) is None and terminal_counts(run.tail) is not None
    return ProbeCall(selectors, run.exit_code, timed_out, tests, bool(run.report), tail,
                     dict(summary) if isinstance(summary, dict) else None, len(failed_collectors(report)),
                     run.sentinel, run.output_capped or pushed_out, run.attempts, run.limits)


def read_node(test: Mapping[str, Any]) -> dict[str, Any]:
    """One test of a probe report; the report is the evaluated code's output, so every field is checked."""
    duration = 0.0
    for stage in ("setup", "call", "teardown"):
        value = test.get(stage)
        seconds = value.get("duration") if isinstance(value, Mapping) else None
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0:
            duration += float(seconds)
    outcome = str(test.get("outcome"))
    if outcome == "passed" and not isinstance(test.get("call"), Mapping):
        # pytest-json-report calls a test "passed" when a KeyboardInterrupt ended it before its call phase was
        # reported; a test whose body never finished has not passed.
        outcome = "interrupted"
    node = {"nodeid": str(test.get("nodeid")), "outcome": outcome, "duration": round(duration, 4)}
    stages = {s: str(test[s].get("outcome")) for s in ("setup", "call", "teardown") if isinstance(test.get(s), Mapping)}
    if stages.get("teardown") == "failed":  # pytest's terminal line counts such a test twice (scoring/tampering.py)
        node["stages"] = stages
    return node


def slow_selectors(batch: ProbeCall, probe_timeout: int) -> tuple[str, ...]:
    """Selectors whose tests ran close to the per-selector limit: alone they might time out."""
    slow = []
    for selector in batch.selectors:
        spent = sum(t["duration"] for t in batch.tests if node_matches(selector, t["nodeid"]))
        if spent > probe_timeout - min(DURATION_MARGIN_SECONDS, probe_timeout / 2):  # short limits keep half
            slow.append(selector)
    return tuple(slow)


def selector_results(run: ProbeRun | None, selectors: Sequence[str],
                     base_ids: Mapping[str, frozenset[str]] | None = None) -> dict[str, SelectorResult]:
    """Each selector's status: from its own process when it had one, else from the shared run. `base_ids`: per
    selector, the node ids the base state collected for it (decision 14), which are then its tests.

    With no probe run at all (the container was killed), every selector counts as not collected.
    """
    results = {}
    for selector in selectors:
        call = _call_for(run, selector)
        own = (base_ids or {}).get(selector)
        if call is None:
            results[selector] = selector_status(selector, [], None, False, own)
        else:
            results[selector] = selector_status(selector, call.tests, call.exit_code, call.timed_out, own)
    return results


def _call_for(run: ProbeRun | None, selector: str) -> ProbeCall | None:
    if run is None:
        return None
    own = [c for c in run.calls if c.selectors == (selector,)]
    if own:
        return own[-1]
    shared = [c for c in run.calls if selector in c.selectors and c.normal]
    return shared[0] if shared else None
