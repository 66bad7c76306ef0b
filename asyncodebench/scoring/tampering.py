"""Whether one pytest process's evidence agrees with itself (METRICS decision 11).

Code under test runs inside pytest's own process, so it can rewrite what pytest reports. It cannot as easily make
every trace of the run agree on the same lie. Four traces are compared here, all saved with the run:

- the sentinel tests the launcher added (`incontainer/launch.py`): four tests of known outcome, named from a
  secret of that process; each must be in the report with its outcome;
- the report's summary against its own list of tests;
- the report against pytest's terminal summary line (`3 failed, 22 passed in 0.5s`), kept in the captured output;
  pytest prints it after the report is written (its terminal summary, failures' tracebacks first, comes after the
  json-report plugin's end of session);
- the report against the exit code the daemon saw.

A disagreement is tampering. The sentinels are then taken out of the report, so they never count in any number,
and the exit code becomes the one pytest would have given without them (the must-fail sentinel makes it 1).

Two disagreements a loaded machine can also produce are not tampering but ambiguous: the harness runs such a
process once more, and if they persist they are listed for review (`integrity.needs_review`), never scored 0:

- pytest's summary line missing from (or cut at the end of) an output that the harness did not cap: the last
  thing pytest prints, so an output stream cut short loses it first. A summary line pushed out of the kept tail
  by the process's own output is still tampering (load prints nothing);
- any disagreement in a process that did not end by itself (a timeout, a kill, an exit code pytest never gives).
  A timeout that fires while pytest prints its terminal summary (on a loaded host that takes seconds: every
  failure's traceback) leaves pytest's own report without its summary line: that report is read. Any other
  disagreement there means the report may not be the session's (stopped before the launcher ended every other
  process, something else may have written it), so it is not read at all, as a missing one: nothing is credited.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncodebench.scoring.grading import failed_collectors as collectors_failed

SENTINEL_OUTCOMES = ("passed", "failed", "error", "skipped")  # the launcher adds one test of each
COUNTED = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
NORMAL_EXIT_CODES = (0, 1)  # the run went to its end: every sentinel must be in the report
AUDIT_LISTED = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STATS_LINE = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+|no tests ran)(?: in [0-9.]+s(?: \([^)]*\))?)\s*=*$")
_WORDS = {"passed": "passed", "failed": "failed", "error": "error", "errors": "error", "skipped": "skipped",
          "xfailed": "xfailed", "xpassed": "xpassed"}


PYTEST_EXIT_CODES = range(7)  # pytest's own (ok, failed, interrupted, internal, usage, no tests, max warnings)


@dataclass(frozen=True)
class SelfCheck:
    """One pytest process's evidence once the sentinels are taken out, and what contradicts itself in it."""

    report: dict[str, Any] | None  # the report without the sentinel tests and their counts
    exit_code: int | None  # the exit code pytest would have given without the sentinels
    tampering: tuple[str, ...]  # why the evidence contradicts itself; empty when it agrees
    # Disagreements a loaded machine can also produce (see the module's docstring): retried, then for review.
    ambiguous: tuple[str, ...] = ()


def sentinel_name(token: str, outcome: str) -> str:
    """The test name of the sentinel of `outcome` (the launcher makes it the same way)."""
    return "test_" + hashlib.sha256(f"{token}:{outcome}".encode()).hexdigest()[:12]


def examine(report: dict[str, Any] | None, exit_code: int | None, output: str, token: str | None,
            failed_collectors: int | None = None, output_capped: bool = False) -> SelfCheck:
    """Check one process's report against its sentinels, its own tests, pytest's terminal line and its exit code.

    `token` None (evidence from before the sentinels) or a missing or unreadable report: nothing to compare, the
    evidence is returned as it is (an unreadable report is already a model failure). `failed_collectors` is given
    when the report itself is not (probe calls keep only its summary and tests). `output_capped`: the kept output
    is not the whole of it (the process printed more than the harness keeps after pytest's summary line).
    """
    summary = report.get("summary") if isinstance(report, dict) else None
    if token is None or not isinstance(summary, Mapping):
        return SelfCheck(report, exit_code, ())
    assert report is not None
    tests = report.get("tests")
    if not isinstance(tests, list) or not all(isinstance(t, Mapping) for t in tests):
        return SelfCheck(report, exit_code, ("the report's list of tests is missing or malformed",))
    if failed_collectors is None:
        failed_collectors = len(collectors_failed(report))
    problems = _sentinel_problems(tests, exit_code, token)
    problems += _summary_problems(summary, tests)
    terminal, unsure = _terminal_problems(summary, tests, output, failed_collectors, output_capped)
    problems += terminal
    problems += _exit_code_problems(summary, exit_code, failed_collectors)
    if problems and exit_code not in PYTEST_EXIT_CODES:
        stopped = (f"the process was stopped before its session ended (exit code {exit_code}), so its report "
                   "was not read")
        return SelfCheck(None, exit_code, (), tuple(f"{stopped}: {reason}" for reason in problems + unsure))
    clean = _without_sentinels(report, summary, tests, token)
    clean_summary = clean["summary"]
    succeeded = not problems and exit_code == 1 and not failed_collectors and not any(
        _count(clean_summary, key) for key in ("failed", "error"))
    return SelfCheck(clean, 0 if succeeded else exit_code, tuple(problems), tuple(unsure))


def _sentinel_problems(tests: Sequence[Mapping[str, Any]], exit_code: int | None, token: str) -> list[str]:
    problems = []
    for outcome in SENTINEL_OUTCOMES:
        found = [str(t.get("outcome")) for t in tests if _is_sentinel(t, token, outcome)]
        if len(found) > 1:
            problems.append(f"the sentinel that must be {outcome} is listed {len(found)} times")
        elif found and _outcome(found[0]) != outcome:
            problems.append(f"the sentinel that must be {outcome} is {found[0]}")
        elif not found and exit_code in NORMAL_EXIT_CODES:
            problems.append(f"the sentinel that must be {outcome} is missing")
    return problems


def _summary_problems(summary: Mapping[str, Any], tests: Sequence[Mapping[str, Any]]) -> list[str]:
    listed = {key: sum(_outcome(t.get("outcome")) == key for t in tests) for key in COUNTED}
    counted = {key: _count(summary, key) for key in COUNTED}
    if listed != counted or _count(summary, "total") != len(tests):
        return [f"the report's summary {_said(counted)} disagrees with its own list of tests {_said(listed)}"]
    return []


NO_SUMMARY_LINE = "the report lists tests but pytest printed no summary line"
LOST_SUMMARY_LINE = ("the report lists tests but the output lacks pytest's summary line at its end (the last thing "
                     "pytest prints: an output cut short, or a process stopped while printing, loses it)")


def _terminal_problems(summary: Mapping[str, Any], tests: Sequence[Mapping[str, Any]], output: str,
                       failed_collectors: int, output_capped: bool) -> tuple[list[str], list[str]]:
    """(contradictions, ambiguous findings) of the report against pytest's terminal summary line."""
    terminal = None if _cut_at_its_end(output) else terminal_counts(output)
    if terminal is None:
        if not tests:
            return [], []
        return ([NO_SUMMARY_LINE], []) if output_capped and not _cut_at_its_end(output) else ([], [LOST_SUMMARY_LINE])
    reported = {key: _count(summary, key) for key in COUNTED}
    reported["error"] += failed_collectors  # pytest's line counts collection errors with the test errors
    reported["passed"] -= sum(map(_interrupted, tests))  # the report counts them as passed; pytest's line does not
    for test in tests:
        counted = _counted_before_a_failed_teardown(test)
        if counted:
            reported[counted] += 1
    if terminal != reported:
        return [f"pytest's terminal summary {_said(terminal)} disagrees with the report {_said(reported)}"], []
    return [], []


def _cut_at_its_end(output: str) -> bool:
    """Whether the output ends inside what can only be pytest's summary line, cut before its duration (pytest
    always ends that line with `in <seconds>s`): the end of the stream was lost, not the line forged."""
    lines = [line.strip() for line in _ANSI.sub("", output).splitlines() if line.strip()]
    if not lines or output.endswith("\n"):
        return False
    match = _STATS_LINE.match(lines[-1])
    return bool(match) and " in " not in lines[-1]


def _exit_code_problems(summary: Mapping[str, Any], exit_code: int | None, failed_collectors: int) -> list[str]:
    failures = _count(summary, "failed") + _count(summary, "error") + failed_collectors
    if exit_code == 0 and failures:
        return [f"exit code 0 with {failures} failure(s) in the report"]
    if exit_code == 1 and not failures:
        return ["exit code 1 (tests failed) with no failure in the report"]
    return []


def terminal_counts(output: str) -> dict[str, int] | None:
    """The counts of pytest's last summary line (`1 failed, 24 passed, 2 warnings in 0.31s`), or None."""
    for line in reversed(_ANSI.sub("", output).splitlines()):
        match = _STATS_LINE.match(line.strip())
        if match:
            counts = dict.fromkeys(COUNTED, 0)
            for number, word in re.findall(r"(\d+) ([a-z]+)", match.group(1)):
                if word in _WORDS:
                    counts[_WORDS[word]] += int(number)
            return counts
    return None


def _without_sentinels(report: Mapping[str, Any], summary: Mapping[str, Any], tests: Sequence[Mapping[str, Any]],
                       token: str) -> dict[str, Any]:
    sentinels = [t for t in tests if any(_is_sentinel(t, token, o) for o in SENTINEL_OUTCOMES)]
    clean = dict(summary)
    for test in sentinels:
        key = "errors" if _outcome(test.get("outcome")) == "error" and "errors" in clean else _outcome(
            test.get("outcome"))
        for counted in (key, "total", "collected"):
            if isinstance(clean.get(counted), int) and clean[counted] > 0:
                clean[counted] -= 1
    return {**report, "summary": clean, "tests": [t for t in tests if t not in sentinels]}


def _is_sentinel(test: Mapping[str, Any], token: str, outcome: str) -> bool:
    return str(test.get("nodeid", "")).endswith("::" + sentinel_name(token, outcome))


def _counted_before_a_failed_teardown(test: Mapping[str, Any]) -> str | None:
    """What pytest's terminal line counted for a test before its teardown failed: the line counts the teardown's
    error on top of the call's outcome (or of the setup's error), while the report lists the test once, as an
    error. Probe calls keep the stages of such tests under `stages`."""
    stages = test.get("stages")
    if not isinstance(stages, Mapping):
        stages = {s: test[s].get("outcome") for s in ("setup", "call", "teardown") if isinstance(test.get(s), Mapping)}
    if stages.get("teardown") != "failed":
        return None
    if stages.get("setup") == "failed":
        return "error"
    return stages.get("call") if stages.get("call") in ("passed", "failed") else None


def _interrupted(test: Mapping[str, Any]) -> bool:
    """A test a KeyboardInterrupt ended after its setup: pytest-json-report lists it as passed, with no call phase
    (probe calls have already renamed it)."""
    outcome = test.get("outcome")
    return outcome == "interrupted" or (outcome == "passed" and "setup" in test and "call" not in test)


def _outcome(value: Any) -> str:
    # pytest-json-report says "passed" for a test a KeyboardInterrupt ended; probe calls record it as interrupted
    return "passed" if value == "interrupted" else str(value)


def _count(summary: Mapping[str, Any], key: str) -> int:
    value = summary.get(key, summary.get("errors", 0) if key == "error" else 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _said(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {key}" for key, n in counts.items() if n) or "nothing"


def audit_events(output: str, token: str | None) -> list[str]:
    """The events the launcher's audit hook printed to `output` under the process's `token`; none without a token."""
    prefix = f"asyncodebench-audit {token} "
    return [line[len(prefix):].strip() for line in output.splitlines() if token and line.startswith(prefix)]
