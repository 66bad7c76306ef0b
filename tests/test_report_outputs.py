"""The run's outputs (issue 8): the reports never depend on the plot, labels are drawn as written, and metrics that
were not measured (--no-probes) are n/a, never 0 or a penalty."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Callable

import pytest
from helpers.dataset_folders import DemoDataset
from helpers.demo_run import FAST_FLAGS, EvalRun, run_evaluate
from helpers.predictions import example_predictions, prediction

from asyncodebench.reports.plots import plot_resolution, resolution_figure

pytestmark = pytest.mark.docker

# Broken mathtext (crashed the plot after the whole evaluation) and valid mathtext (drawn as a formula, not as written).
MATH_NAMES = ["$\\frac{$agent", "model $x^2$ v1"]
NOT_APPLYING = ("diff --git a/minicache/core.py b/minicache/core.py\n--- a/minicache/core.py\n+++ b/minicache/core.py\n"
                "@@ -1,3 +1,3 @@\n-this line is not in the file\n+nor is this one\n context that is not there\n")


def gold() -> str:
    return example_predictions()["demo-gold"]["model_patch"]


def assert_outputs_complete(run: EvalRun) -> None:
    for name in ("report.json", "report.md", "summary.csv", "predictions.csv"):
        assert (run.run_dir / name).is_file(), name
    assert "Traceback" not in run.stderr


# --- 6. the plot ------------------------------------------------------------------------------------------------


def test_model_names_with_dollar_signs_are_plotted_as_written(demo_dataset: DemoDataset,
                                                             evaluate: Callable[..., EvalRun]) -> None:
    run = evaluate([prediction(name, gold()) for name in MATH_NAMES] + [prediction("no-apply", NOT_APPLYING)],
                   demo_dataset.path, *FAST_FLAGS, "--max-workers", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    assert_outputs_complete(run)
    assert (run.run_dir / "dependency_resolution.png").stat().st_size > 1000
    assert {r["model_name_or_path"] for r in csv.DictReader(io.StringIO((run.run_dir / "summary.csv").read_text()))} \
        == {*MATH_NAMES, "no-apply"}
    for name in MATH_NAMES:
        assert run.row(name)["adpr"] == 1.0
    # Probes on, but the patch never reached the code: measured as failing, scored 0 and kept in every mean.
    no_apply = run.row("no-apply")
    assert no_apply["patch_status"] == "failed" and (no_apply["adpr"], no_apply["adpr_numerator"]) == (0.0, 0)


def test_panel_titles_show_the_labels_as_written_and_the_legend_covers_no_panel(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    trace = {"dep": [{"upstream": True, "downstream": False, "integrated": False},
                     {"upstream": True, "downstream": True, "integrated": True}]}
    predictions = [{"status": "evaluated", "model_name_or_path": name, "protocol": "single", "dependency_trace": trace}
                   for name in MATH_NAMES]
    figure = resolution_figure(predictions)
    try:
        figure.canvas.draw()
        panels = [axes for axes in figure.axes if axes.get_visible()]
        # One panel per (model, protocol), titled with the name as written, never read as mathtext, and the
        # protocol's display name.
        assert sorted((a.title.get_text(), a.title.get_parse_math()) for a in panels) == sorted(
            (f"{name}\nSingle", False) for name in MATH_NAMES)
        (legend,) = figure.legends
        assert [t.get_text() for t in legend.get_texts()] == [
            "integrated probes", "upstream probes", "downstream probes"]
        box = legend.get_window_extent()
        assert not any(box.overlaps(a.get_window_extent()) for a in panels)
        # True values: every plotted point is a share in [0, 1], exactly as measured (no offset between series).
        for axes in panels:
            assert {tuple(line.get_ydata()) for line in axes.get_lines()} == {(1.0, 1.0), (0.0, 1.0)}
    finally:
        plt.close(figure)
    assert plot_resolution(predictions, tmp_path / "plot.png") == tmp_path / "plot.png"


def test_a_plot_that_cannot_be_written_is_a_warning_and_the_reports_are_complete(demo_dataset: DemoDataset,
                                                                                 tmp_path: Path) -> None:
    out = tmp_path / "runs"
    (out / "plot-blocked" / "dependency_resolution.png").mkdir(parents=True)  # savefig cannot write over a folder
    run = run_evaluate([prediction("m", gold())], demo_dataset.path, "plot-blocked", out, *FAST_FLAGS)
    assert run.returncode == 0, run.stderr[-3000:]
    assert_outputs_complete(run)
    (warning,) = [line for line in run.stderr.splitlines() if line.startswith("warning:")]
    assert "plot was not written" in warning and "reports are complete" in warning
    assert "## Predictions" in (run.run_dir / "report.md").read_text()
    assert run.report["counts"]["evaluated"] == 1
    assert "PNG" not in run.stdout.splitlines()[-1]


# --- 10. --no-probes --------------------------------------------------------------------------------------------


def test_without_probes_the_dependency_metrics_are_not_available_and_left_out_of_the_means(
        demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun]) -> None:
    run = evaluate([prediction("gold-unprobed", gold())], demo_dataset.path, *FAST_FLAGS, "--no-probes")
    assert run.returncode == 0, run.stderr[-3000:]
    result = run.result("gold-unprobed")
    assert result["final_success"] is True  # the evaluator did run
    assert (result["adpr"], result["adpr_numerator"]) == (None, None) and result["adpr_denominator"] > 0
    assert all(result["run_metrics"][k] is None for k in ("adpr", "final_pass_count", "unresolved_count",
                                                          "drs_penalized_mean", "dre_mean", "cail_penalized_mean"))
    assert all(d["integrated_pass"] is None for d in result["dependencies"])
    assert "--no-probes" in result["metrics_not_measured"]
    (summary,) = run.report["summary"]
    assert summary["micro_adpr"] is None
    for key in ("mean_adpr", "mean_drs_penalized", "mean_dre", "mean_cail_penalized", "mean_unresolved_dependencies"):
        assert summary[key]["mean"] is None and summary[key]["n"] == 0, key
    assert summary["fsr"]["mean"] == 1.0
    markdown = (run.run_dir / "report.md").read_text()
    (row,) = [line for line in markdown.splitlines() if line.startswith("| 1 | gold-unprobed |")]
    assert "| n/a |" in row
    # The summary's row comes first; the other tables' rows for the same cell (trust, timing, usage) follow.
    cell_rows = [line for line in markdown.splitlines() if line.startswith("| gold-unprobed | single |")]
    summary_row = cell_rows[0]
    assert "| gold-unprobed | single | 1 | 0 | 0 |" in cell_rows  # the trust table: verified, needs review, tampering
    assert summary_row.count("n/a") == 2  # macro and micro ADPR
    assert any("not run (--no-probes)" in note for note in run.report["notes"])
    assert not (run.run_dir / "dependency_resolution.png").exists()  # no trace to draw


def test_rescoring_a_run_without_probes_keeps_its_metrics_not_available(
        demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun], tmp_path: Path) -> None:
    """Rescoring uses the settings the results were made with, whatever its own flags say."""
    run = evaluate([prediction("gold-unprobed", gold())], demo_dataset.path, *FAST_FLAGS, "--no-probes")
    assert run.returncode == 0, run.stderr[-3000:]
    rescored = evaluate(Path(f"{run.run_dir}.jsonl"), demo_dataset.path, "--rescore", run_id=run.run_dir.name,
                        env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    assert rescored.report["predictions"] == run.report["predictions"]
    assert rescored.report["run"]["settings"]["run_probes"] is False
    assert json.loads((run.folder("gold-unprobed") / "result.json").read_text())["adpr"] is None


# --- review flags (integrity.review): shown in every report, never scored --------------------------------------


def test_every_report_shows_the_review_flags_of_the_demo_run(shared_demo_run: EvalRun) -> None:
    report, run_dir = shared_demo_run.report, shared_demo_run.run_dir
    fork_bomb = shared_demo_run.row("hostile-fork-bomb")
    assert fork_bomb["review_flag_count"] == 1
    assert fork_bomb["review_flags"] == [{"file": "minicache/core.py", "line": 61, "marker": "os_exit",
                                          "text": "os._exit(0)", "severity": "high", "patch": "model_patch"}]
    assert fork_bomb["trust_status"] == "needs_review"  # os._exit is high: held for review, scored as before
    assert [f["marker"] for f in shared_demo_run.row("hostile-forged-output")["review_flags"]] == [
        "atexit", "reads_tests", "atexit"]  # the forged PASSED lines name the task's test files
    for name in ("demo-gold", "demo-partial", "demo-empty", "hostile-conftest"):
        assert shared_demo_run.row(name)["review_flag_count"] == 0, name
    markdown = (run_dir / "report.md").read_text()
    (row,) = [line for line in markdown.splitlines() if line.startswith(f"| {fork_bomb['line']} | hostile-fork-bomb |")]
    assert row.endswith("review os_exit minicache/core.py:61 |")  # the same flags as the HTML page's
    section = markdown.split("## Review flags (shown, never scored)", 1)[1]
    assert "- `minicache/core.py:61` os_exit `os._exit(0)` (model_patch)" in section
    assert "demo-gold" not in section.split("\n## ", 1)[0]
    assert sum(r["review_flagged"] for r in report["summary"]) == sum(
        bool(p.get("review_flag_count")) for p in report["predictions"])
    # Flags never score: the flagged prediction keeps the scores its run earned.
    result = shared_demo_run.result("hostile-fork-bomb")
    assert result["integrity"]["review"]["count"] == 1
    assert (fork_bomb["outcome"], fork_bomb["final_success"]) == (result["outcome"], result["final_success"])
