"""Paired statistics and scripts/compare.py (issue 12, item 2; the reading rules of issue 20), without containers or
a browser.

The statistics are checked against values worked out by hand below and against scipy (used here only, as an
independent implementation); the pairing against small hand-made reports.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.checkout import ROOT, SCRIPTS, script_env
from scipy import stats

from asyncodebench.dataset.publish import hub_files
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.dataset.validation import validator
from asyncodebench.reports.compare import Run, compare_runs
from asyncodebench.reports.htmlcompare import render_compare
from asyncodebench.reports.paired import (
    MIN_TASKS_FOR_LABEL,
    average_ranks,
    min_tasks_for_label,
    paired,
    reading,
    sign_test,
    signed_rank,
)
from asyncodebench.reports.synthetic import synthetic_report

# --- the worked example --------------------------------------------------------------------------------------
# Eight tasks, differences b - a. Nonzero: 7 (one tie at zero); 5 positive, 2 negative.
# |d| sorted: .1 .1 .2 .2 .3 .4 .4 -> average ranks 1.5 1.5 3.5 3.5 5 6.5 6.5.
# W+ = 3.5 (0.2) + 6.5 + 6.5 (0.4, 0.4) + 5 (0.3) + 1.5 (0.1) = 23; W- = 1.5 + 3.5 = 5; 23 + 5 = 28 = 7 * 8 / 2.
# Sign test: P(X <= 2 | n=7, p=1/2) = (1 + 7 + 21) / 128 = 29/128, two-sided 58/128 = 0.453125.
# Mean: (0.2 - 0.1 + 0.4 + 0.4 + 0 + 0.3 - 0.2 + 0.1) / 8 = 1.1 / 8 = 0.1375.
EXAMPLE = [0.2, -0.1, 0.4, 0.4, 0.0, 0.3, -0.2, 0.1]


def test_the_worked_example_by_hand() -> None:
    result = paired(EXAMPLE)
    assert (result.tasks, result.positive, result.negative, result.zero) == (8, 5, 2, 1)
    assert result.mean_difference == pytest.approx(0.1375)
    assert result.sign_p == pytest.approx(58 / 128)
    assert result.wilcoxon_statistic == 23
    assert average_ranks([0.2, 0.1, 0.4, 0.4, 0.3, 0.2, 0.1]) == [3.5, 1.5, 6.5, 6.5, 5, 3.5, 1.5]


def test_the_exact_signed_rank_p_without_ties_by_hand_and_by_scipy() -> None:
    # d = 1..5 and -6: W+ = 15. Subsets of {1..6} summing to <= 6: {}, six singletons, {1,2} {1,3} {1,4} {1,5}
    # {2,3} {2,4}, {1,2,3}: 14 of 64, so the two-sided p is 28/64.
    differences = [1, 2, 3, 4, 5, -6]
    statistic, p = signed_rank(differences)
    assert statistic == 15 and p == pytest.approx(28 / 64)
    assert p == pytest.approx(stats.wilcoxon(differences, method="exact").pvalue)


def test_the_signed_rank_p_with_ties_equals_scipys_full_permutation_test() -> None:
    nonzero = [d for d in EXAMPLE if d]
    exact = stats.wilcoxon(nonzero, method=stats.PermutationMethod(n_resamples=2 ** len(nonzero)))
    assert signed_rank(EXAMPLE)[1] == pytest.approx(exact.pvalue)


def test_random_cases_agree_with_scipy() -> None:
    rng = np.random.default_rng(7)
    for _ in range(12):
        differences = (rng.integers(-3, 4, size=int(rng.integers(3, 11))) / 4).tolist()
        nonzero = [d for d in differences if d]
        result = paired(differences)
        if not nonzero:
            assert result.sign_p is None and result.wilcoxon_p is None
            continue
        assert result.sign_p == pytest.approx(stats.binomtest(result.positive, len(nonzero)).pvalue)
        if len(nonzero) >= 2:
            permutation = stats.PermutationMethod(n_resamples=2 ** len(nonzero))
            assert result.wilcoxon_p == pytest.approx(stats.wilcoxon(nonzero, method=permutation).pvalue)


def test_the_bootstrap_interval_resamples_tasks_with_seed_42() -> None:
    # The same draw written out independently: 10,000 resamples of task indices, percentile interval.
    data = np.array(EXAMPLE)
    picks = np.random.default_rng(42).integers(0, len(data), size=(10_000, len(data)))
    means = data[picks].mean(axis=1)
    result = paired(EXAMPLE)
    assert (result.ci_low, result.ci_high) == pytest.approx((np.percentile(means, 2.5), np.percentile(means, 97.5)))
    # And close to the exact bootstrap distribution of a smaller example (all 5^5 resamples, each counted).
    small = [0.2, -0.1, 0.4, 0.0, 0.3]
    exact, sampled = _exact_bootstrap_quantiles(small), paired(small)
    assert sampled.ci_low == pytest.approx(exact[0], abs=0.021)
    assert sampled.ci_high == pytest.approx(exact[1], abs=0.021)


def _exact_bootstrap_quantiles(values: list[float]) -> tuple[float, float]:
    """2.5% and 97.5% quantiles of the mean over every one of the n^n equally likely resamples."""
    means = sorted(sum(values[i] for i in picks) / len(values)
                   for picks in itertools.product(range(len(values)), repeat=len(values)))
    return means[int(0.025 * len(means))], means[int(0.975 * len(means))]


def test_degenerate_inputs() -> None:
    assert paired([]).mean_difference is None and paired([]).tasks == 0
    same = paired([0.0, 0.0, 0.0])
    assert (same.mean_difference, same.ci_low, same.ci_high, same.sign_p, same.wilcoxon_p) == (0, 0, 0, None, None)
    assert sign_test(0, 0) is None and sign_test(3, 3) == 1.0
    # Differences equal on paper are equal here too: 0.9 - 0.5 and 0.7 - 0.3 tie.
    assert paired([0.9 - 0.5, 0.7 - 0.3]).wilcoxon_statistic == 3


# --- pairing across runs ---------------------------------------------------------------------------------------


def _report(run_id: str, rows: list[tuple[str, str, str, float | None]], revision: str = "v0.4.2",
            steps: dict[tuple[str, str, str], tuple[int, float]] | None = None) -> dict[str, Any]:
    """A minimal report: (model, protocol, task, pass rate or None for an infrastructure error); `steps` gives some
    (model, protocol, task) a checkpoint count T and a DRS (CAIL the same)."""
    predictions = []
    for line, (model, protocol, task, rate) in enumerate(rows, start=1):
        base = {"task_id": task, "protocol": protocol, "model_name_or_path": model, "line": line}
        if rate is None:
            predictions.append({**base, "status": "infrastructure_error",
                                "infrastructure_error": {"kind": "image_missing", "message": "x"}})
        else:
            predictions.append({**base, "status": "evaluated", "final_success": rate == 1.0, "pass_rate": rate,
                                "adpr": None, "drs_penalized_mean": None, "dre_mean": None,
                                "cail_penalized_mean": None})
            if steps and (model, protocol, task) in steps:
                t, drs = steps[(model, protocol, task)]
                predictions[-1].update(checkpoint_count=t, drs_penalized_mean=drs, cail_penalized_mean=drs)
    dataset = {"source": "hub", "id": "PhilipZhang/AsynCodeBench", "revision": revision, "resolved_commit": None,
               "content_sha256": None}
    return {"run": {"run_id": run_id, "dataset": dataset, "tool": {"version": "test"}}, "predictions": predictions}


def _one(record: dict[str, Any], view: str, metric: str) -> dict[str, Any]:
    (found,) = [c for c in record["comparisons"] if c["view"] == view and c["metric"] == metric]
    return found


def test_pairs_only_the_tasks_both_cells_scored() -> None:
    a = _report("ra", [("m", "single", "t1", 0.5), ("m", "single", "t2", 0.25), ("m", "single", "t3", 1.0),
                       ("m", "async_private", "t1", 0.75), ("m", "async_private", "t2", None),  # infra: not paired
                       ("m", "async_private", "t4", 1.0)])
    record = compare_runs([Run("ra", "a/report.json", a)])
    found = _one(record, "protocols", "pass_rate")
    assert (found["tasks"], found["tasks_only_a"], found["tasks_only_b"]) == (1, 2, 1)
    assert found["mean_difference"] == pytest.approx(0.25)  # t1: 0.75 - 0.5
    assert _one(record, "protocols", "adpr")["tasks"] == 0  # not measured: nothing to pair, never 0
    validator("compare").validate(record)


def test_the_same_model_in_two_runs_is_compared_run_against_run() -> None:
    first = _report("before", [("m", "single", t, r) for t, r in (("t1", 0.5), ("t2", 0.5), ("t3", 0.0))])
    second = _report("after", [("m", "single", t, r) for t, r in (("t1", 1.0), ("t2", 0.75), ("t3", 0.0))])
    record = compare_runs([Run("before", "1", first), Run("after", "2", second)])
    found = _one(record, "runs", "pass_rate")
    assert (found["a"]["run"], found["b"]["run"], found["tasks"]) == ("before", "after", 3)
    assert found["mean_difference"] == pytest.approx(0.25) and (found["positive"], found["zero"]) == (2, 1)
    assert not [c for c in record["comparisons"] if c["view"] == "models"]  # one model: nothing to pair
    assert {c["subject"] for c in record["cells"]} == {"m @ before", "m @ after"}


def test_runs_on_different_revisions_are_refused_unless_allowed() -> None:
    runs = [Run("a", "1", _report("a", [("m", "single", "t1", 0.5)], revision="v0.4.2")),
            Run("b", "2", _report("b", [("n", "single", "t1", 0.5)], revision="v0.4.1"))]
    with pytest.raises(ValueError, match="different datasets.*--allow-different-datasets"):
        compare_runs(runs)
    record = compare_runs(runs, allow_mixed=True)
    assert record["dataset_check"]["consistent"] is False and record["dataset_check"]["allowed_mixed"] is True
    assert "Compared anyway" in record["dataset_check"]["message"]


# --- the readings (issue 20) -----------------------------------------------------------------------------------


def test_six_tasks_is_the_least_that_can_reach_the_level() -> None:
    assert min_tasks_for_label(0.05) == MIN_TASKS_FOR_LABEL == 6
    # Five tasks all one way: the strongest evidence five can give, and neither test reaches 0.05.
    assert sign_test(5, 0) == pytest.approx(0.0625) and signed_rank([1, 2, 3, 4, 5])[1] == pytest.approx(0.0625)
    assert reading(paired([0.5] * 5), higher_is_better=True) == "too few tasks: no inference"
    assert reading(paired([0.5] * 6), higher_is_better=True) == "b better"
    assert reading(paired([0.5] * 6), higher_is_better=False) == "b worse"  # steps: higher is worse


def test_one_task_gives_no_label_and_no_interval() -> None:
    one = paired([0.75])
    assert (one.tasks, one.mean_difference, one.ci_low, one.ci_high) == (1, 0.75, None, None)
    assert reading(one, higher_is_better=True) == "one task: no inference"
    assert reading(paired([]), higher_is_better=True) == "no tasks paired"
    rows = [("m", "single", "t1", 0.0), ("m", "async_private", "t1", 1.0)]
    record = compare_runs([Run("r", "r", _report("r", rows))])
    found = _one(record, "protocols", "pass_rate")
    assert found["reading"] == "one task: no inference" and found["ci_low"] is None
    page = render_compare(record)
    assert "+100.0 (one task, no interval)" in page and "one task: no inference" in page
    validator("compare").validate(record)


def test_a_label_needs_both_tests_and_the_interval() -> None:
    # 8 tasks, 5 up and 2 down: the interval may sit above 0, but the sign test (p = 0.45) does not support it.
    result = paired(EXAMPLE)
    assert result.sign_p is not None and result.sign_p > 0.05
    assert reading(result, higher_is_better=True) == "no clear difference"
    # All zero: nothing to test.
    assert reading(paired([0.0] * 10), higher_is_better=True) == "no clear difference"
    # 15 of 19 up a little, 4 down by a lot: the sign test says up (p = 0.019), the interval says down; no label.
    mixed = paired([0.1] * 15 + [-2.0] * 4)
    assert mixed.sign_p is not None and mixed.sign_p < 0.05 and mixed.ci_high is not None and mixed.ci_high < 0
    assert reading(mixed, higher_is_better=True) == "no clear difference"


def test_steps_pair_only_tasks_with_the_same_checkpoint_count() -> None:
    tasks = [f"t{i}" for i in range(8)]
    rows = [(m, p, t, 1.0) for m in ("m", "n") for p in ("single", "async_private") for t in tasks]
    steps = {("m", "single", t): (1, 2.0) for t in tasks}  # single: T = 1; async_private: T = 5 or 7
    steps |= {("m", "async_private", t): (5 if i < 4 else 7, 6.0) for i, t in enumerate(tasks)}
    steps |= {("n", "async_private", t): (5, 1.0) for t in tasks}  # the same T as m's on t0..t3 only
    record = compare_runs([Run("r", "r", _report("r", rows, steps=steps))])
    for metric in ("drs_penalized", "cail_penalized"):
        (across,) = [c for c in record["comparisons"]  # m: single against async_private
                     if c["view"] == "protocols" and c["metric"] == metric and c["a"]["model"] == "m"]
        assert (across["tasks"], across["tasks_t_differs"], across["mean_difference"]) == (0, 8, None)
        assert across["reading"] == "T differs: not compared"
        (models,) = [c for c in record["comparisons"]  # async_private: m against n
                     if c["view"] == "models" and c["metric"] == metric and c["a"]["protocol"] == "async_private"]
        assert (models["tasks"], models["tasks_t_differs"]) == (4, 4)
        assert models["reading"] == "too few tasks: no inference" and models["mean_difference"] == -5.0
    (shares,) = [c for c in record["comparisons"]
                 if c["view"] == "protocols" and c["metric"] == "pass_rate" and c["a"]["model"] == "m"]
    assert (shares["tasks"], shares["tasks_t_differs"]) == (8, 0)  # shares do not depend on T
    validator("compare").validate(record)


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub and most renderers make it."""
    return re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-")


def test_the_notes_explain_the_rules_in_words_and_link_to_the_kits_metrics_document() -> None:
    record = compare_runs([Run("r", "r", _report("r", [("m", "single", "t1", 0.5)]))])
    document = (ROOT / "docs" / "METRICS.md").read_text(encoding="utf-8")
    anchors = {_slug(line.lstrip("#")) for line in document.splitlines() if line.startswith("#")}
    assert record["notes"]
    for note in record["notes"]:
        path, _, anchor = note["link"].partition("#")
        assert path == "docs/METRICS.md" and anchor in anchors, note["link"]
        assert not re.search(r"decision \d", note["text"], re.IGNORECASE)  # words, not a number to look up
    text = " ".join(note["text"] for note in record["notes"])
    assert "one task: no inference" in text and "at least 6 tasks" in text and "2 to 5 tasks read" in text
    assert "T differs" in text and "{" not in text
    assert (ROOT / "docs" / "METRICS.md").is_file()
    hub_copy = f"https://huggingface.co/datasets/{DEFAULT_DATASET}/blob/{DEFAULT_REVISION}/docs/METRICS.md"
    assert f"{hub_copy}#decisions-for-this-project" in render_compare(record)
    assert Path("docs/METRICS.md") in hub_files()  # the card links it, so the Hub has the page the link opens


# --- the script ------------------------------------------------------------------------------------------------


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / "compare.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=script_env())


def test_the_script_writes_html_csv_and_json_and_refuses_mixed_datasets(tmp_path: Path) -> None:
    runs = []
    for seed, revision in ((0, "v0.4.2"), (1, "v0.4.2"), (2, "v0.4.1")):
        report = synthetic_report(tasks=5, models=("synth-model-a", "synth-model-b"), points=12, seed=seed,
                                  protocols=("single", "async_private"), run_id=f"synth{seed}")
        report["run"]["dataset"]["revision"] = revision
        report["run"]["dataset"]["resolved_commit"] = None
        (tmp_path / f"run{seed}").mkdir()
        (tmp_path / f"run{seed}" / "report.json").write_text(json.dumps(report))
        runs.append(str(tmp_path / f"run{seed}"))
    out = tmp_path / "out" / "compare.html"
    done = _compare(runs[0], runs[1], "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record == json.loads(out.with_suffix(".json").read_text())
    validator("compare").validate(record)
    assert {c["view"] for c in record["comparisons"]} == {"protocols", "models", "runs"}
    rows = list(csv.DictReader(io.StringIO(out.with_suffix(".csv").read_text())))
    assert len(rows) == len(record["comparisons"]) and float(rows[0]["tasks"]) == record["comparisons"][0]["tasks"]
    assert "All runs used the same dataset" in out.read_text()
    assert {c["reading"] for c in record["comparisons"]} <= {
        "b better", "b worse", "no clear difference", "too few tasks: no inference", "T differs: not compared"}

    refused = _compare(runs[0], runs[2], "-o", str(tmp_path / "refused.html"))
    assert refused.returncode == 2 and "different datasets" in refused.stderr
    assert "--allow-different-datasets" in refused.stderr and not (tmp_path / "refused.html").exists()
    allowed = _compare(runs[0], runs[2], "-o", str(tmp_path / "mixed.html"), "--allow-different-datasets")
    assert allowed.returncode == 0 and "Compared anyway" in allowed.stdout
    assert "Compared anyway" in (tmp_path / "mixed.html").read_text()

    missing = _compare(str(tmp_path / "no-such-run"), "-o", str(tmp_path / "x.html"))
    assert missing.returncode == 2 and "cannot read a run report" in missing.stderr
