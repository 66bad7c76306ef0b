"""Reports shaped as pytest-json-report writes them, with the sentinels of one process and the terminal line pytest
prints, for the pure checks of scoring/tampering.py (tests/test_tampering.py, tests/test_load_ambiguity.py)."""

from __future__ import annotations

from typing import Any

from asyncodebench.scoring.tampering import sentinel_name

TOKEN = "0123456789abcdef"
SENTINELS = {outcome: f"tests/test_{TOKEN}.py::{sentinel_name(TOKEN, outcome)}"
             for outcome in ("passed", "failed", "error", "skipped")}


def test_entry(nodeid: str, outcome: str) -> dict[str, Any]:
    phases = {"setup": {"outcome": "passed"}}
    if outcome in ("passed", "failed"):
        phases["call"] = {"outcome": outcome}
    return {"nodeid": nodeid, "outcome": outcome, **phases}


def report_of(outcomes: dict[str, str], sentinels: dict[str, str] | None = None) -> dict[str, Any]:
    """A report of these real tests plus the sentinels (each with the outcome given, by default its own)."""
    sentinels = {o: o for o in SENTINELS} if sentinels is None else sentinels
    tests = [test_entry(SENTINELS[role], outcome) for role, outcome in sentinels.items()]
    tests += [test_entry(nodeid, outcome) for nodeid, outcome in outcomes.items()]
    summary: dict[str, int] = {}
    for test in tests:
        summary[test["outcome"]] = summary.get(test["outcome"], 0) + 1
    summary.update(total=len(tests), collected=len(tests))
    return {"summary": summary, "tests": tests, "collectors": []}


def terminal_line(report: dict[str, Any]) -> str:
    summary = report["summary"]
    words = {"failed": "failed", "passed": "passed", "skipped": "skipped", "error": "errors"}
    parts = [f"{summary[key]} {word}" for key, word in words.items() if summary.get(key)]
    return "....F.s.E\n" + ", ".join(parts) + " in 0.42s\n"


REAL = {"tests/test_a.py::test_one": "passed", "tests/test_a.py::test_two": "passed",
        "tests/test_b.py::test_three": "failed"}
