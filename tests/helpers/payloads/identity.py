"""Hostile predictions aimed at METRICS decision 14: tests swapped, renamed, re-parametrized or dropped so that the
counts stay right (tests/test_hostile_grading.py, tests/test_identity_attacks.py).

None touches a test file (test targets are restored) or a conftest (removed): the code under test, imported while
pytest collects, takes pytest's configuration from the assertion rewriter on `sys.meta_path` (no `gc`, no frames)
and registers a plugin that edits the collected items. Each knows the demo's inventory (which 18 tests fail at
base) and drops those tests or changes their ids, adding passing tests in their place so that the count rules of
decisions 9 and 12 are kept; pytest then reports every test passed and exits 0, sentinels and terminal line in
agreement. None implements anything, so each must score exactly what the base state scores: 7 of 25, no final
success, no probe passed that fails at base.
"""

from __future__ import annotations

from helpers.payloads.hostile import CORE, PatchMaker, Payload, _appended, _checkpoint, _line

# The demo's tests that fail at base (every one calls a stub); the other 7 pass.
BASE_FAILING = (
    "tests/test_api.py::test_memoize_reuses_result",
    "tests/test_api.py::test_memoize_keyword_arguments_are_part_of_the_key",
    "tests/test_api.py::test_memoize_typed_separates[int-float]",
    "tests/test_api.py::test_memoize_typed_separates[bool-int]",
    "tests/test_api.py::test_cache_info_counts_hits_and_misses",
    "tests/test_api.py::test_evicts_least_recent_call",
    "tests/test_api.py::test_cache_clear_resets_entries_and_counters",
    "tests/test_api.py::test_wrapper_keeps_name_and_docstring",
    "tests/test_core.py::test_get_missing_returns_default",
    "tests/test_core.py::test_put_then_get",
    "tests/test_core.py::test_evicts_least_recently_used",
    "tests/test_core.py::test_get_refreshes_recency",
    "tests/test_core.py::test_clear_empties_but_keeps_eviction_count",
    "tests/test_core.py::test_make_key_equal_for_equal_calls",
    "tests/test_core.py::test_make_key_ignores_keyword_order",
    "tests/test_core.py::test_make_key_separates_positional_from_keyword",
    "tests/test_core.py::test_make_key_typed[int-float]",
    "tests/test_core.py::test_make_key_typed[bool-int]",
)

# How a failing test is replaced, by mode: `swap` drops it and adds a new passing test under a new name; `rename`
# keeps its function's name with a suffix; `reparametrize` gives it one new parameter id (a selector naming the
# bare function then matches it by the `[param]` rule); `drop-file` drops all of tests/test_api.py and adds as many
# passing tests to tests/test_stats.py.
EDIT_COLLECTION = '''
import sys as _sys


def _passes():
    pass


class _IdentityEdit(object):
    def pytest_collection_modifyitems(self, session, config, items):
        import pytest as _pytest
        failing = set(BASE_FAILING)
        kept, added = [], []
        dropped = [i for i in items if i.nodeid in failing or (MODE == "drop-file" and i.nodeid.startswith(
            "tests/test_api.py::"))]
        for item in items:
            if item not in dropped:
                kept.append(item)
                continue
            bare = item.name.split("[", 1)[0]
            name = {"swap": "test_swapped_%d" % len(added), "rename": "%s_renamed" % bare,
                    "reparametrize": "%s[edited]" % bare, "drop-file": "test_added_%d" % len(added)}[MODE]
            parent = item.parent
            if MODE == "drop-file":
                parent = next((i.parent for i in items if i.nodeid.startswith("tests/test_stats.py::")), parent)
            added.append(_pytest.Function.from_parent(parent, name=name, callobj=_passes))
        seen = set()
        items[:] = kept + [a for a in added if not (a.nodeid in seen or seen.add(a.nodeid))]
        while len(items) < len(kept) + len(dropped):  # the same count (re-parametrized duplicates folded)
            items.append(_pytest.Function.from_parent(kept[-1].parent, name="test_filler_%d" % len(items),
                                                      callobj=_passes))


def _register():
    for _finder in _sys.meta_path:
        _config = getattr(_finder, "config", None)
        _manager = getattr(_config, "pluginmanager", None)
        if _manager is not None and not _manager.has_plugin("minicache-identity-edit"):
            _manager.register(_IdentityEdit(), "minicache-identity-edit")


_register()
'''

IDENTITY_PAYLOADS = ("identity-swap-failing-for-passing", "identity-rename-failing-tests",
                     "identity-reparametrize-failing-tests", "identity-drop-a-test-file",
                     "checkpoint-identity-reparametrize", "agents-identity-swap")
"""The names of the payloads below, in order (the tests look their results up by name)."""


def _edit(mode: str) -> dict[str, str]:
    return _appended(CORE, f"MODE = {mode!r}\nBASE_FAILING = {BASE_FAILING!r}\n" + EDIT_COLLECTION)


def identity_payloads(make: PatchMaker) -> list[Payload]:
    """Decision 14's payloads: four forms in final patches, one in a checkpoint state, one in an agent's patch."""
    d = make.diff
    finals, (checkpoint, agents) = IDENTITY_PAYLOADS[:4], IDENTITY_PAYLOADS[4:]
    found = [Payload(name, 10, "final", _line(name, d(_edit(mode))))
             for name, mode in zip(finals, ("swap", "rename", "reparametrize", "drop-file"))]
    found.append(Payload(checkpoint, 10, "checkpoint", _line(checkpoint, "", protocol="async_private", checkpoints=[
        _checkpoint("agent_artifact", "agent_workspace", "core_agent", d(_edit("reparametrize"))),
        _checkpoint("final_integrated", "integrated_workspace", None, d(_edit("swap")))])))
    found.append(Payload(agents, 10, "agents", _line(agents, None, protocol="async_private",
                                                     agent_patches={"core_agent": d(_edit("swap"))})))
    return found
