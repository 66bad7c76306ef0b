"""Dependency metrics of one run, their aggregation over tasks, and the SAD proxy (METRICS 4-7, section 11)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from asyncodebench.dataset.sources import dependency_rows, read_yaml
from asyncodebench.scoring.bootstrap import macro_mean
from asyncodebench.scoring.dependency import (
    CheckpointRecord,
    DependencyOutcome,
    DependencyPoint,
    RunMetrics,
    penalized_cail,
    run_metrics,
    sort_checkpoints,
)
from asyncodebench.scoring.sad import new_definitions, producer_tokens, sad_proxy_candidates

AGENT, INTEGRATED = "agent_workspace", "integrated_workspace"


def _dep(dependency_id: str, **fields: object) -> DependencyPoint:
    row = {"dependency_id": dependency_id, "producer_agent": "a", "consumer_agent": "b", **fields}
    return DependencyPoint.from_row(row)


def _checkpoint(step: int, kind: str, states: dict[str, str], final: bool = False,
                recorded_at: str = "") -> CheckpointRecord:
    """A checkpoint from compact group states: "PFF" means upstream passed, downstream and integrated failed."""
    outcomes = tuple(DependencyOutcome(dep, *(flag == "P" for flag in state)) for dep, state in states.items())
    kind_type = "final_integrated" if final else ("agent_artifact" if kind == AGENT else "integration_after_merge")
    return CheckpointRecord(step, kind_type, kind_type if final else f"cp{step}", kind,
                            recorded_at or f"2025-01-01T00:00:{step:02d}", outcomes)


def _example_a(final_d1: str = "PPP") -> list[CheckpointRecord]:
    """METRICS 11 A: two-agent serial run, T=5."""
    return [
        _checkpoint(1, AGENT, {"d1": "PFF", "d2": "FFF"}),
        _checkpoint(2, INTEGRATED, {"d1": "PFF", "d2": "FFF"}),
        _checkpoint(3, AGENT, {"d1": "PPP", "d2": "PFF"}),
        _checkpoint(4, INTEGRATED, {"d1": "PPP", "d2": "PFF"}),
        _checkpoint(5, INTEGRATED, {"d1": final_d1, "d2": "PFF"}, final=True),
    ]


TWO_DEPS = [_dep("d1"), _dep("d2", consumer_agent="integrator")]


def test_example_a_two_agent_serial_run() -> None:
    run = run_metrics(_example_a(), TWO_DEPS)
    d1, d2 = run.dependencies
    assert (d1.up, d1.down, d1.drs) == (1, 3, 4), "step 3 is an agent workspace, so strict DRS is 4"
    assert (d1.drs_penalized, d1.cail_raw, d1.cail_penalized) == (4, 2, 2)
    assert d1.dre == pytest.approx(0.4)
    assert (d2.up, d2.down, d2.drs) == (3, None, None)
    assert (d2.drs_penalized, d2.dre, d2.cail_raw, d2.cail_penalized) == (6, 0.0, None, 3)
    assert run.checkpoint_count == 5
    assert (run.adpr, run.unresolved_count) == (0.5, 1)
    assert run.drs_penalized_mean == 5.0
    assert run.cail_penalized_mean == 2.5
    assert run.dre_mean == pytest.approx(0.2)


def test_example_b_regression_at_the_final_checkpoint_is_unresolved() -> None:
    """Official rule (decision 4): passing at step 4 does not help when the final state fails."""
    run = run_metrics(_example_a(final_d1="PPF"), TWO_DEPS)
    d1 = run.dependencies[0]
    assert run.adpr == 0.0
    assert d1.drs == 4 and not d1.resolved, "the raw step stays observable, but it is not resolved"
    assert (d1.drs_penalized, d1.dre) == (6, 0.0)
    assert run.unresolved_count == 2


def test_example_c_producer_passes_only() -> None:
    """METRICS 11 C: T=13; producer probes pass at steps 3 and 11; nothing else ever passes."""
    checkpoints = [
        _checkpoint(step, INTEGRATED if step % 2 == 0 else AGENT,
                    {"d1": "PFF" if step >= 3 else "FFF", "d2": "PFF" if step >= 11 else "FFF"},
                    final=step == 13)
        for step in range(1, 14)
    ]
    run = run_metrics(checkpoints, TWO_DEPS)
    assert run.adpr == 0.0 and run.unresolved_count == 2
    assert [dep.drs_penalized for dep in run.dependencies] == [14, 14]
    assert [dep.cail_penalized for dep in run.dependencies] == [11, 3]
    assert run.cail_penalized_mean == 7.0 and run.drs_penalized_mean == 14.0


def test_example_d_single_agent_run_has_t_equal_one() -> None:
    """METRICS 11 D (wcwidth, single): only the final checkpoint, upstream passes for both dependencies."""
    run = run_metrics([_checkpoint(1, INTEGRATED, {"d1": "PFF", "d2": "PFF"}, final=True)], TWO_DEPS)
    assert run.checkpoint_count == 1 and run.has_final_checkpoint
    assert run.adpr == 0.0 and run.unresolved_count == 2
    assert [dep.drs_penalized for dep in run.dependencies] == [2, 2]
    assert [dep.dre for dep in run.dependencies] == [0.0, 0.0]
    assert [dep.cail_penalized for dep in run.dependencies] == [1, 1]
    assert run.drs_penalized_mean == 2.0 and run.cail_penalized_mean == 1.0


def _final_only(passes: list[bool]) -> RunMetrics:
    deps = [_dep(f"d{index}") for index in range(len(passes))]
    states = {dep.dependency_id: "PPP" if ok else "FFF" for dep, ok in zip(deps, passes, strict=True)}
    return run_metrics([_checkpoint(1, INTEGRATED, states, final=True)], deps)


def test_example_e_macro_adpr_over_three_tasks() -> None:
    runs = [_final_only([True, True]), _final_only([True, False]), _final_only([False] * 4)]
    assert [run.adpr for run in runs] == [1.0, 0.5, 0.0]
    assert macro_mean([run.adpr for run in runs if run.adpr is not None]).mean == pytest.approx(0.5)
    assert macro_mean([1.0, 0.0, 0.0]).mean == pytest.approx(1 / 3), "success rate over [T, F, F]"


def test_example_e_a_failed_task_stays_in_the_mean_pass_rate() -> None:
    estimate = macro_mean([0.9, 0.6, 0 / 215])
    assert estimate.n == 3 and estimate.mean == pytest.approx(0.5)


def test_resolved_at_step_one_has_efficiency_one() -> None:
    run = run_metrics([_checkpoint(1, INTEGRATED, {"d1": "PPP"}, final=True)], [_dep("d1")])
    assert run.dependencies[0].dre == 1.0 and run.dependencies[0].cail_penalized == 0


def test_pass_then_regress_then_recover_uses_the_first_integrated_pass() -> None:
    checkpoints = [
        _checkpoint(1, INTEGRATED, {"d1": "PPP"}),
        _checkpoint(2, INTEGRATED, {"d1": "PFF"}),
        _checkpoint(3, INTEGRATED, {"d1": "PPP"}, final=True),
    ]
    d1 = run_metrics(checkpoints, [_dep("d1")]).dependencies[0]
    assert d1.resolved and d1.drs == 1 and d1.dre == 1.0


def test_passes_only_in_an_agent_workspace_is_not_resolved() -> None:
    checkpoints = [
        _checkpoint(1, AGENT, {"d1": "PPP"}),
        _checkpoint(2, INTEGRATED, {"d1": "PFF"}),
        _checkpoint(3, INTEGRATED, {"d1": "PFF"}, final=True),
    ]
    run = run_metrics(checkpoints, [_dep("d1")])
    d1 = run.dependencies[0]
    assert d1.drs is None and not d1.resolved
    assert (d1.up, d1.down) == (1, 1), "agent workspaces still count for the up/down steps"
    assert (d1.drs_penalized, d1.dre, d1.cail_penalized) == (4, 0.0, 0)


def test_negative_raw_cail_is_kept_raw_and_floored_when_penalized() -> None:
    checkpoints = [
        _checkpoint(1, AGENT, {"d1": "FPF"}),
        _checkpoint(2, INTEGRATED, {"d1": "PPP"}, final=True),
    ]
    d1 = run_metrics(checkpoints, [_dep("d1")]).dependencies[0]
    assert d1.cail_raw == -1
    assert d1.cail_penalized == 0


def test_empty_downstream_list_always_takes_a_penalty_branch() -> None:
    """A dependency without downstream probes never has a downstream step (its group never passes)."""
    dep = _dep("d1", downstream_probe_tests=[])
    checkpoints = [_checkpoint(1, AGENT, {"d1": "FFF"}), _checkpoint(2, INTEGRATED, {"d1": "PFP"}),
                   _checkpoint(3, INTEGRATED, {"d1": "PFP"}, final=True)]
    d1 = run_metrics(checkpoints, [dep]).dependencies[0]
    assert d1.down is None and d1.cail_raw is None
    assert d1.cail_penalized == 3 + 1 - 2
    assert d1.resolved and d1.drs == 2


@pytest.mark.parametrize(("up", "down", "expected"), [(2, 5, 3), (5, 2, 0), (2, None, 4), (None, None, 6),
                                                      (None, 3, 6)])
def test_three_case_cail_penalty(up: int | None, down: int | None, expected: int) -> None:
    assert penalized_cail(up, down, 5) == expected


def test_dependency_missing_from_the_final_checkpoint_counts_as_not_passed() -> None:
    run = run_metrics([_checkpoint(1, INTEGRATED, {"d1": "PPP"}, final=True)], TWO_DEPS)
    assert run.adpr == 0.5 and not run.dependencies[1].final_integrated_pass


def test_run_without_final_checkpoint_is_scored_from_the_last_and_flagged() -> None:
    run = run_metrics([_checkpoint(1, INTEGRATED, {"d1": "PPP"})], [_dep("d1")])
    assert not run.has_final_checkpoint and run.adpr == 1.0


def test_no_checkpoints_leaves_penalized_means_uncomputed() -> None:
    run = run_metrics([], [_dep("d1")])
    assert run.checkpoint_count == 0 and run.adpr == 0.0
    assert run.drs_penalized_mean is None and run.dre_mean is None and run.cail_penalized_mean is None


def test_no_dependency_points_gives_no_adpr() -> None:
    run = run_metrics([_checkpoint(1, INTEGRATED, {}, final=True)], [])
    assert run.adpr is None and run.drs_penalized_mean is None


def test_checkpoints_sort_by_step_then_recording_time() -> None:
    late = _checkpoint(2, INTEGRATED, {}, recorded_at="2025-01-01T00:00:09")
    early = _checkpoint(2, AGENT, {}, recorded_at="2025-01-01T00:00:05")
    first = _checkpoint(1, AGENT, {})
    assert sort_checkpoints([late, first, early]) == [first, early, late]


def test_logical_step_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="logical_step must be an int >= 1"):
        _checkpoint(0, AGENT, {})


# --- aggregation (decision 7) ----------------------------------------------------------------------------------


def test_bootstrap_is_deterministic_and_brackets_the_mean() -> None:
    values = [0.1, 0.9, 0.4, 0.7, 0.0, 1.0]
    first, second = macro_mean(values), macro_mean(values)
    assert first == second
    assert first.ci_low <= first.mean <= first.ci_high
    assert 0.0 <= first.ci_low < first.ci_high <= 1.0


def test_bootstrap_without_numpy_is_deterministic_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    values = [0.1, 0.9, 0.4, 0.7]
    estimate = macro_mean(values)
    assert estimate.resampler == "random"
    assert estimate == macro_mean(values)
    assert estimate.ci_low <= estimate.mean <= estimate.ci_high


def test_single_task_has_a_degenerate_interval() -> None:
    estimate = macro_mean([0.25])
    assert (estimate.mean, estimate.ci_low, estimate.ci_high) == (0.25, 0.25, 0.25)


def test_empty_input_is_unscored_nan_not_zero() -> None:
    estimate = macro_mean([])
    assert not estimate.scored and estimate.n == 0
    assert math.isnan(estimate.mean) and math.isnan(estimate.ci_low) and math.isnan(estimate.ci_high)


def test_macro_mean_refuses_nan_so_no_task_is_dropped_silently() -> None:
    with pytest.raises(ValueError, match="score every task"):
        macro_mean([0.5, math.nan])


# --- SAD proxy (METRICS 7, item 2; decision 6) -----------------------------------------------------------------

SAD_DEP = _dep(
    "cachetools.keys_to_func.untyped_key_contract",
    producer_agent="key_agent",
    producer_files=["src/cachetools/keys.py"],
    consumer_files=["src/cachetools/func.py"],
    upstream_probe_tests=["tests/test_keys.py::CacheKeysTest::test_hashkey"],
    metrics_enabled=["ADPR", "DRS", "CAIL", "SAD"],
)

DIFF = """\
diff --git a/src/cachetools/func.py b/src/cachetools/func.py
--- a/src/cachetools/func.py
+++ b/src/cachetools/func.py
@@ -1,3 +1,14 @@
-def old_hashkey():
+def _hash_key(*args):
+    pass
+class _UnTypedKey:
+    async def tools(self):
+        pass
+def lru_cache(maxsize=128):
+    return None
 def unchanged_hashkey():
@@ -20,2 +31,3 @@
+def _hash_key(*args, **kwargs):
diff --git a/src/cachetools/keys.py b/src/cachetools/keys.py
--- a/src/cachetools/keys.py
+++ b/src/cachetools/keys.py
@@ -1 +1,2 @@
+def hashkey(*args):
"""


def test_producer_tokens_follow_the_token_rules() -> None:
    tokens = producer_tokens(SAD_DEP)
    assert {"cachetools", "keys", "testhashkey", "untypedkeycontract", "hash", "typed"} <= tokens
    assert not tokens & {"src", "py", "tests", "contract"}, "short words and stopwords are dropped"


def test_new_definitions_are_read_per_file_from_added_lines() -> None:
    added = new_definitions(DIFF)
    assert added["src/cachetools/func.py"] == {"hashkey", "untypedkey", "tools", "lrucache"}
    assert added["src/cachetools/keys.py"] == {"hashkey"}


def test_sad_proxy_counts_unique_consumer_symbols_matching_producer_tokens() -> None:
    candidates = sad_proxy_candidates([SAD_DEP, SAD_DEP], DIFF)
    assert candidates == [
        ("src/cachetools/func.py", "hashkey"),  # token "hash" inside the name
        ("src/cachetools/func.py", "tools"),  # the name inside the token "cachetools"
        ("src/cachetools/func.py", "untypedkey"),  # token "typed" inside the name
    ]


def test_sad_proxy_ignores_dependencies_without_sad_or_with_the_integrator_as_producer() -> None:
    without_sad = _dep("cachetools.keys_to_func.hashkey", producer_agent="key_agent",
                       consumer_files=["src/cachetools/func.py"], metrics_enabled=["ADPR"])
    integrator = _dep("cachetools.keys_to_func.hashkey", producer_agent="integrator",
                      consumer_files=["src/cachetools/func.py"], metrics_enabled=["SAD"])
    assert sad_proxy_candidates([without_sad, integrator], DIFF) == []
    assert sad_proxy_candidates([SAD_DEP], "") == []


# The `deprecated` task: sphinx_agent (consumer, deprecated/sphinx.py) builds on classic_agent's classic.deprecated,
# and the contracts name versionadded, versionchanged and deprecated. The reference solution only re-quotes the
# signatures of those three functions of sphinx.py; counting each changed `def` line as a new definition gave 3 SAD
# candidates for the reference solution itself.
DEPRECATED_DEPS = [DependencyPoint.from_row(row) for row in dependency_rows(
    read_yaml(Path(__file__).resolve().parent.parent / "data" / "tasks" / "deprecated.yaml"))]
REQUOTED_SIGNATURES = """\
diff --git a/deprecated/sphinx.py b/deprecated/sphinx.py
--- a/deprecated/sphinx.py
+++ b/deprecated/sphinx.py
@@ -120,7 +120,7 @@ class SphinxAdapter(ClassicAdapter):
         return super(SphinxAdapter, self).get_deprecated_msg(wrapped, instance)
 
 
-def versionadded(reason='', version='', line_length=70):
+def versionadded(reason="", version="", line_length=70):
     \"\"\"
     Insert a "versionadded" directive in the docstring.
 
@@ -140,7 +140,7 @@ def versionadded(reason='', version='', line_length=70):
     return adapter
 
 
-def versionchanged(reason='', version='', line_length=70):
+def versionchanged(reason="", version="", line_length=70):
     \"\"\"
     Insert a "versionchanged" directive in the docstring.
 
@@ -160,7 +160,7 @@ def versionchanged(reason='', version='', line_length=70):
     return adapter
 
 
-def deprecated(reason='', version='', line_length=70, **kwargs):
+def deprecated(reason="", version="", line_length=70, **kwargs):
     \"\"\"
     Insert a "deprecated" directive in the docstring and emit a warning.
 
"""  # noqa: W293 (a diff's blank context line is one space)
# A consumer that re-implements the producer's warning text in its own file instead of relying on classic.py.
SECOND_DEFINITION = """\
diff --git a/deprecated/sphinx.py b/deprecated/sphinx.py
--- a/deprecated/sphinx.py
+++ b/deprecated/sphinx.py
@@ -10,6 +10,10 @@ import textwrap
 from deprecated.classic import ClassicAdapter
 from deprecated.classic import deprecated as _classic_deprecated
 
+def get_deprecated_msg(wrapped, reason):
+    return "Call to deprecated function {}. ({})".format(wrapped.__name__, reason)
+
+
 class SphinxAdapter(ClassicAdapter):
"""  # noqa: W293 (a diff's blank context line is one space)


def test_sad_proxy_does_not_count_re_quoted_signatures_of_the_consumers_own_functions() -> None:
    assert new_definitions(REQUOTED_SIGNATURES) == {}
    assert sad_proxy_candidates(DEPRECATED_DEPS, REQUOTED_SIGNATURES) == []


def test_sad_proxy_still_counts_a_second_definition_of_a_producer_function_in_the_consumer_file() -> None:
    expected = [("deprecated/sphinx.py", "getdeprecatedmsg")]
    assert sad_proxy_candidates(DEPRECATED_DEPS, SECOND_DEFINITION) == expected
    assert sad_proxy_candidates(DEPRECATED_DEPS, REQUOTED_SIGNATURES + SECOND_DEFINITION) == expected


def test_new_definitions_use_what_the_diff_shows_of_the_base() -> None:
    diff = """\
diff --git a/pkg/consumer.py b/pkg/consumer.py
--- a/pkg/consumer.py
+++ b/pkg/consumer.py
@@ -1,4 +1,4 @@
 def kept_hashkey():
+def kept_hashkey(): # redefinition of a name the context shows at base
-def moved_hashkey():
     pass
@@ -40,2 +40,4 @@ def header_hashkey(x):
+def header_hashkey(x, y):
+def moved_hashkey():
+def _new_hashkey():
diff --git a/pkg/producer.py b/pkg/producer.py
--- a/pkg/producer.py
+++ b/pkg/producer.py
@@ -1,2 +1,1 @@
-def from_producer_hashkey():
diff --git a/pkg/other.py b/pkg/other.py
--- a/pkg/other.py
+++ b/pkg/other.py
@@ -1 +1,2 @@
+def from_producer_hashkey():
"""
    # Moved within a file, edited in place, named in a hunk header: not new. Moved from another file: new there.
    assert new_definitions(diff) == {"pkg/consumer.py": {"newhashkey"}, "pkg/other.py": {"fromproducerhashkey"}}


def test_example_e_micro_adpr_pools_the_dependency_points_of_every_task() -> None:
    """The report's micro ADPR over the same three tasks: (2 + 1 + 0) / (2 + 2 + 4) = 0.375, not the macro 0.5."""
    from asyncodebench.reports.report import summarize
    from asyncodebench.reports.synthetic import synthetic_inputs, typed_results

    _, _, results = synthetic_inputs(tasks=3, models=("m",), protocols=("single",), infrastructure_errors=0)
    for result, run in zip(results, [_final_only([True, True]), _final_only([True, False]), _final_only([False] * 4)],
                           strict=True):
        result.update(adpr=run.adpr, adpr_numerator=run.final_pass_count, adpr_denominator=run.dependency_count)
    (row,) = summarize(typed_results(results))
    assert row["micro_adpr"] == pytest.approx(0.375) and row["mean_adpr"]["mean"] == pytest.approx(0.5)
