"""The run page's headline ranking (reports/ranking.py) on hand-made predictions: a clear winner, a tie within the
uncertainty, one task, one model, and the rule that no model is ranked above one with a higher mean."""

from __future__ import annotations

from typing import Any

import pytest

from asyncodebench.reports.ranking import ONE_MODEL, ONE_TASK, OVERALL, RANKED, TOO_FEW, headline, rank


def predictions(model: str, successes: list[int], protocol: str = "single") -> list[dict[str, Any]]:
    """One evaluated prediction per task: task k succeeds when successes[k] is 1."""
    return [{"status": "evaluated", "model_name_or_path": model, "protocol": protocol, "task_id": f"task{k:02d}",
             "final_success": bool(s)} for k, s in enumerate(successes)]


def by_scope(rankings: list[Any]) -> dict[str, Any]:
    return {r.scope: r for r in rankings}


def test_a_clear_winner_ranks_first_alone() -> None:
    rows = predictions("strong", [1] * 10) + predictions("weak", [0] * 10)
    (overall, single) = headline(rows, ("single",))
    assert overall.scope == OVERALL and single.scope == "single"
    for ranking in (overall, single):
        assert ranking.state == RANKED
        strong, weak = ranking.standings
        assert (strong.model, strong.rank, strong.tied, strong.rank_text) == ("strong", 1, False, "1")
        assert (weak.model, weak.rank, weak.tied, weak.rank_text) == ("weak", 2, False, "2")
        assert strong.mean == 1.0 and weak.mean == 0.0 and strong.tasks == 10


def test_overlapping_results_are_a_tie_at_the_top() -> None:
    """6 of 10 against 5 of 10 on different tasks: the leader's mean is higher, but nothing tells them apart."""
    rows = predictions("a", [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]) + predictions("b", [0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    ranking = by_scope(headline(rows))["single"]
    assert ranking.state == RANKED
    a, b = ranking.standings
    assert (a.model, a.rank_text, b.model, b.rank_text) == ("a", "=1", "b", "=1")
    assert a.mean == pytest.approx(0.6) and a.ci_low is not None and a.ci_low < b.mean < a.ci_high


def test_three_models_a_tie_below_a_clear_leader() -> None:
    rows = (predictions("top", [1] * 12) + predictions("mid", [0, 1] * 6) + predictions("low", [1, 0] * 6))
    standings = by_scope(headline(rows))["single"].standings
    assert [(s.model, s.rank_text) for s in standings] == [("top", "1"), ("low", "=2"), ("mid", "=2")]


def test_one_task_is_said_plainly_and_not_ranked() -> None:
    rows = predictions("a", [1]) + predictions("b", [0])
    ranking = by_scope(headline(rows))["single"]
    assert ranking.state == ONE_TASK
    assert [(s.model, s.mean, s.rank, s.rank_text, s.ci_low, s.ci_high) for s in ranking.standings] == [
        ("a", 1.0, None, "", None, None), ("b", 0.0, None, "", None, None)]


def test_one_model_is_not_ranked() -> None:
    ranking = by_scope(headline(predictions("only", [1, 0, 1, 1])))["single"]
    assert ranking.state == ONE_MODEL and ranking.standings[0].rank is None
    assert ranking.standings[0].ci_low is not None  # four tasks still give an interval


def test_fewer_tasks_than_a_label_needs_tie_everyone() -> None:
    """Five tasks can never reach p <= 0.05 in the exact tests, however clear the data look."""
    ranking = by_scope(headline(predictions("a", [1] * 5) + predictions("b", [0] * 5)))["single"]
    assert ranking.state == TOO_FEW
    assert [s.rank_text for s in ranking.standings] == ["=1", "=1"]


def test_overall_weighs_protocols_equally_within_a_task() -> None:
    rows = (predictions("a", [1] * 8, "single") + predictions("a", [0] * 8, "serial_specialists")
            + predictions("b", [1] * 8, "single") + predictions("b", [1] * 8, "serial_specialists"))
    rankings = headline(rows, ("single", "serial_specialists"))
    assert [r.scope for r in rankings] == [OVERALL, "single", "serial_specialists"]
    overall = rankings[0]
    assert [(s.model, s.mean, s.rank_text) for s in overall.standings] == [("b", 1.0, "1"), ("a", 0.5, "2")]
    assert [s.rank_text for s in rankings[1].standings] == ["=1", "=1"]  # identical on single


def test_no_model_ranks_above_one_with_a_higher_mean() -> None:
    """`steady` is clearly behind `top` and `noisy` clearly behind nobody (its results swing both ways); listed by
    mean, `noisy` (lower mean) may not rank ahead of `steady`."""
    models = {"top": {f"t{k}": 0.9 for k in range(10)}, "steady": {f"t{k}": 0.45 for k in range(10)},
              "noisy": {f"t{k}": (1.0 if k < 4 else 0.0) for k in range(10)}}
    ranking = rank("single", models)
    assert [(s.model, s.rank) for s in ranking.standings] == [("top", 1), ("steady", 2), ("noisy", 2)]


def test_infrastructure_errors_and_unscored_rows_are_left_out() -> None:
    rows = predictions("a", [1] * 6) + [{"status": "infrastructure_error", "model_name_or_path": "a",
                                          "protocol": "single", "task_id": "task99"}]
    (ranking,) = [r for r in headline(rows) if r.scope == "single"]
    assert ranking.standings[0].tasks == 6


def test_the_page_states_the_rule_and_the_sessions_of_a_resumed_run() -> None:
    """The run page's headline says how it ranks; a run resumed over sessions says so in its run line."""
    from asyncodebench.reports.htmlreport import render_report
    from asyncodebench.reports.synthetic import synthetic_report

    report = synthetic_report(tasks=3, points=4)
    report["run"]["sessions"] = [
        {"started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T01:00:00+00:00", "evaluated": 3,
         "ended": "interrupted"},
        {"started_at": "2026-01-02T00:00:00+00:00", "finished_at": "2026-01-02T01:00:00+00:00", "evaluated": 42,
         "ended": "finished"}]
    page = render_report(report)
    assert "in 2 sessions (2026-01-01T00:00:00+00:00 to 2026-01-01T01:00:00+00:00: 3 evaluated, interrupted;" in page
    # Three tasks: no difference can reach the rule, and the page says so instead of ranking.
    assert "With 3 tasks no difference between models can be told apart" in page
    assert "10,000 resamples, seed 42" in page and "A shared rank (=1) is a tie within the uncertainty" in page
