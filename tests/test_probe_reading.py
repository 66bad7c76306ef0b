"""Probe reports are the evaluated code's output: read defensively, and never credit a test that did not finish."""

from __future__ import annotations

from asyncodebench.harness.probes import read_node


def test_a_test_without_a_call_phase_is_not_passed() -> None:
    """What pytest-json-report writes for a test a KeyboardInterrupt ended: setup passed, no call phase."""
    interrupted = {"nodeid": "tests/t.py::a", "outcome": "passed", "setup": {"duration": 0.1, "outcome": "passed"}}
    assert read_node(interrupted)["outcome"] == "interrupted"
    finished = {**interrupted, "call": {"duration": 0.2, "outcome": "passed"}}
    assert read_node(finished) == {"nodeid": "tests/t.py::a", "outcome": "passed", "duration": 0.3}


def test_malformed_stage_fields_do_not_break_reading() -> None:
    weird = {"nodeid": "tests/t.py::b", "outcome": "failed", "setup": 5, "call": {"duration": "long"},
             "teardown": {"duration": -3}}
    assert read_node(weird) == {"nodeid": "tests/t.py::b", "outcome": "failed", "duration": 0.0}


def test_only_selectors_near_a_short_limit_are_rerun_alone() -> None:
    """With a 5 s limit the fixed 5 s margin would send every selector to a run of its own (seen: the suite's
    replays took ten times longer); the margin is at most half the limit."""
    from asyncodebench.harness.probes import ProbeCall, slow_selectors

    batch = ProbeCall(("t.py::fast", "t.py::slow"), 1, False, (
        {"nodeid": "t.py::fast", "outcome": "passed", "duration": 0.01},
        {"nodeid": "t.py::slow", "outcome": "passed", "duration": 3.0}), True, "")
    assert slow_selectors(batch, 5) == ("t.py::slow",)
    assert slow_selectors(batch, 60) == ()
