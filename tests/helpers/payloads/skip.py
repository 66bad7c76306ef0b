"""Hostile predictions of attack class 1 aimed at METRICS decision 12: failures turned into skips and xfails, seen
by test id (tests/test_hostile_grading.py).

What the demo can express: its base state skips and xfails nothing (7 passed, 18 failed of 25), so there is no
skip a patch could un-skip to make room, and every skip here also breaks the count rule of decision 9. The swap
that passes the count rule (un-skip the base's skipped tests, skip as many failing ones) needs a base with skips;
tests/test_grading.py proves the identity rule on such reports, and tests/test_hostile_grading.py replays the
real reports of these payloads against edited base records (a base that skipped other tests, the same tests, or
an old record without ids) by rescoring a copy of the run. Here every one of the 18 failing tests is turned into a
skip or an xfail, each payload by another route, so pytest exits 0 and only the integrity rules stand between the
payload and full credit; none implements anything, so none deserves more than the base state.
"""

from __future__ import annotations

from typing import Any

from helpers.payloads.hostile import API, CORE, PatchMaker, Payload, _base_text, _checkpoint, _line

STUB = "raise NotImplementedError("
SKIPPING = {  # how a stub gives up, by route: each replaces `raise NotImplementedError(` and takes its message
    "pytest.skip": "__import__('pytest').skip(",
    "pytest.xfail": "__import__('pytest').xfail(",
    "importorskip": "__import__('pytest').importorskip('minicache_native_backend', reason=",  # never installed
    "Skipped": "raise __import__('_pytest.outcomes', fromlist=['Skipped']).Skipped(",
    "SkipTest": "raise __import__('unittest').SkipTest(",
}
SKIP_PAYLOADS = ("skip-core-xfail-api", "importorskip-every-stub", "raw-skipped-exception",
                 "checkpoint-final-state-skips-failures", "agents-xfail-and-skip")
"""The names of the payloads below, in order (the tests look their results up by name)."""


def _stubs(path: str, route: str) -> str:
    """The base text of `path` with every stub giving up by `route` instead of failing."""
    return _base_text(path).replace(STUB, SKIPPING[route])


def skip_payloads(make: PatchMaker) -> list[Payload]:
    """The decision-12 payloads, on the final patch, a checkpoint state and agent patches."""
    d = make.diff
    found = [
        Payload("skip-core-xfail-api", 1, "final", _line(
            "skip-core-xfail-api", d({CORE: _stubs(CORE, "pytest.skip"), API: _stubs(API, "pytest.xfail")}))),
        Payload("importorskip-every-stub", 1, "final", _line(
            "importorskip-every-stub", d({CORE: _stubs(CORE, "importorskip"), API: _stubs(API, "importorskip")}))),
        Payload("raw-skipped-exception", 1, "final", _line(
            "raw-skipped-exception", d({CORE: _stubs(CORE, "Skipped"), API: _stubs(API, "Skipped")}))),
    ]
    core_skipped = d({CORE: _stubs(CORE, "SkipTest")})
    everything = d({CORE: _stubs(CORE, "SkipTest"), API: _stubs(API, "pytest.xfail")})
    found.append(Payload("checkpoint-final-state-skips-failures", 1, "checkpoint", _checkpoints_line(
        "checkpoint-final-state-skips-failures", [
            _checkpoint("agent_artifact", "agent_workspace", "core_agent", core_skipped),
            _checkpoint("integration_after_merge", "integrated_workspace", "core_agent", core_skipped),
            _checkpoint("final_integrated", "integrated_workspace", None, everything)])))
    found.append(Payload("agents-xfail-and-skip", 1, "agents", _line(
        "agents-xfail-and-skip", None, protocol="async_private",
        agent_patches={"core_agent": d({CORE: _stubs(CORE, "pytest.xfail")}),
                       "api_agent": d({API: _stubs(API, "SkipTest")})})))
    assert tuple(p.name for p in found) == SKIP_PAYLOADS
    return found


def _checkpoints_line(name: str, checkpoints: list[dict[str, Any]]) -> dict[str, Any]:
    return _line(name, "", protocol="async_private", checkpoints=checkpoints)
