"""The HTML pages (issues 12 and 20): report.html of a real run and of a release-size synthetic run, and
compare.html, opened in headless Chromium (Debian's, driven by Playwright; it cannot download a browser here).

Each page must load with no console error and no request but its own file, show the numbers of its JSON, sort and
filter, and read with JavaScript off. The run page opens with its headline (the FSR ranking) and each summary row
opens its predictions in the page. At 1280 and 390 px every page fits its viewport (wide tables scroll in their own
box) and passes the checks of helpers/page_checks.py: captions, text alternatives, text of 10 px or more, contrast of
4.5:1 or more. Screenshots are kept in build/test-artifacts/ (git-ignored) for people to look at.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import page_checks
from helpers.checkout import ROOT
from helpers.chromium import CHROMIUM
from helpers.demo_run import EvalRun

from asyncodebench.dataset.protocols import display_name
from asyncodebench.reports.compare import Run, compare_runs
from asyncodebench.reports.htmlcompare import render_compare
from asyncodebench.reports.htmlreport import main as htmlreport_main
from asyncodebench.reports.htmlreport import render_report
from asyncodebench.reports.synthetic import synthetic_report

ARTIFACTS = ROOT / "build" / "test-artifacts"
HOSTILE_MODEL = '<img src="http://127.0.0.1:9/x.png" onerror="console.error(\'ran\')">'


class Opened:
    """A page as loaded, with every request it made and every console error or uncaught exception."""

    def __init__(self, browser: Any, path: Path, javascript: bool = True,
                 viewport: tuple[int, int] = (1400, 900)) -> None:
        self.context = browser.new_context(java_script_enabled=javascript,
                                           viewport={"width": viewport[0], "height": viewport[1]})
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url, wait_until="load")

    def assert_clean(self) -> None:
        assert self.errors == []
        assert self.requests == [self.url], "the page fetched something besides itself"

    def rows(self, table: str) -> list[list[str]]:
        """The text of every visible body row's cells (what a reader sees, in order)."""
        return self.page.eval_on_selector_all(
            f"{table} tbody tr", "rows => rows.filter(r => !r.hidden).map(r => "
                                 "Array.from(r.cells).map(c => c.textContent.trim()))")

    def screenshot(self, name: str, full_page: bool = False) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.evaluate("window.scrollTo(0, 0)")  # the top of the page, whatever a test clicked
        self.page.screenshot(path=str(ARTIFACTS / name), full_page=full_page)
        return ARTIFACTS / name

    def close(self) -> None:
        self.context.close()


def _estimate_text(estimate: dict[str, Any], scale: float, digits: int) -> str:
    """How the summary table writes an estimate: the mean, then its interval."""
    if estimate["mean"] is None:
        return "n/a"
    mean, low, high = (estimate[k] * scale for k in ("mean", "ci_low", "ci_high"))
    return f"{mean:.{digits}f}[{low:.{digits}f}, {high:.{digits}f}]"


def _check_summary(opened: Opened, report: dict[str, Any]) -> None:
    """The summary table: key columns first (model, protocol by its card name, the metrics), then the counts."""
    shown = {(cells[0], cells[1]): cells for cells in opened.rows("#summary-table")}
    assert len(shown) == len(report["summary"])
    for row in report["summary"]:
        cells = shown[(row["model_name_or_path"], display_name(row["protocol"]))]
        assert cells[2] == _estimate_text(row["fsr"], 100, 1)
        assert cells[3] == _estimate_text(row["mean_pass_rate"], 100, 1)
        assert cells[4] == _estimate_text(row["mean_adpr"], 100, 1)
        assert cells[6] == _estimate_text(row["mean_drs_penalized"], 1, 2)
        assert cells[8] == _estimate_text(row["mean_cail_penalized"], 1, 2)
        assert cells[9:12] == [str(row["tasks"]), str(row["evaluated"]), str(row["infrastructure_errors"])]
    fsr = [float(cells[2].split("[")[0]) for cells in opened.rows("#summary-table") if cells[2] != "n/a"]
    assert fsr == sorted(fsr, reverse=True)  # the best first


# --- the demo run's page ---------------------------------------------------------------------------------------


def test_the_demo_runs_page_shows_report_json_offline(shared_demo_run: EvalRun, browser: Any) -> None:
    page_file, report = shared_demo_run.run_dir / "report.html", shared_demo_run.report
    assert page_file.is_file(), "evaluate.py wrote no report.html"
    opened = Opened(browser, page_file)
    try:
        opened.assert_clean()
        _check_summary(opened, report)
        predictions = opened.rows("#predictions-table")
        assert len(predictions) == len(report["predictions"])
        by_line = {int(cells[3]): cells for cells in predictions}
        for p in report["predictions"]:
            cells = by_line[p["line"]]
            assert cells[:3] == [p["task_id"], p["model_name_or_path"], display_name(p["protocol"])]
            assert cells[4] == p["outcome"] and cells[5] == f"{p['tests_passed']}/{p['tests_denominator']}"
            assert cells[6] == f"{p['pass_rate'] * 100:.1f}" and cells[11] == p["patch_status"]
        flagged = {c[1]: c[12] for c in predictions}
        assert "integrity_collection_shrunk" in flagged["demo-syntax-error"]
        assert "restored: tests/test_api.py" in flagged["hostile-test-edit"]
        assert "review os_exit minicache/core.py:61" in flagged["hostile-fork-bomb"]  # shown, never scored
        assert "review" not in flagged["demo-gold"]
        # Every artifact link points at a file the run folder has.
        hrefs = opened.page.eval_on_selector_all("#predictions-table a", "links => links.map(a => a.href)")
        files = [Path(href.removeprefix("file://")) for href in hrefs if not href.endswith("/")]
        assert files and all(f.is_file() for f in files), [f for f in files if not f.is_file()]
        # One timeline per (prediction, dependency point); every contract summary of the task is shown.
        traces = sum(len(p.get("dependency_trace") or {}) for p in report["predictions"])
        assert opened.page.locator("svg.timeline[aria-hidden]").count() == traces
        text = opened.page.inner_text("#dependencies ~ details")
        for contract in report["run"]["dependency_points"].values():
            assert contract["contract_summary"] in " ".join(text.split())
        assert opened.page.locator("#resolution-figure svg").count() == 1
        print(f"screenshot: {opened.screenshot('report-demo.png')}")
    finally:
        opened.close()


def test_the_demo_runs_tables_sort_and_filter(shared_demo_run: EvalRun, browser: Any) -> None:
    opened = Opened(browser, shared_demo_run.run_dir / "report.html")
    try:
        header = opened.page.locator("#predictions-table thead th", has_text="pass rate").locator("button")
        header.click()
        rates = [float(cells[6]) for cells in opened.rows("#predictions-table")]
        assert rates == sorted(rates) and rates[0] < rates[-1]
        header.click()
        assert [float(cells[6]) for cells in opened.rows("#predictions-table")] == sorted(rates, reverse=True)
        opened.page.locator("#summary-table").locator("xpath=preceding-sibling::div[1]//input").fill("demo-gold")
        assert [cells[0] for cells in opened.rows("#summary-table")] == ["demo-gold"]
        opened.assert_clean()
    finally:
        opened.close()


def test_the_page_reads_with_javascript_off(shared_demo_run: EvalRun, browser: Any) -> None:
    opened = Opened(browser, shared_demo_run.run_dir / "report.html", javascript=False)
    try:
        opened.assert_clean()
        _check_summary(opened, shared_demo_run.report)  # the tables are plain HTML
        assert len(opened.rows("#predictions-table")) == len(shared_demo_run.report["predictions"])
        assert opened.page.locator("button.sort").count() == 0 and opened.page.locator("input.filter").count() == 0
    finally:
        opened.close()


def test_an_older_report_without_contracts_still_makes_a_page(shared_demo_run: EvalRun, tmp_path: Path) -> None:
    """Old run folders get a page too: fields added since (contracts, scope flags, image sources) are optional."""
    report = json.loads((shared_demo_run.run_dir / "report.json").read_text())
    for key in ("dependency_points", "image_sources", "baselines", "command", "overlays"):
        report["run"].pop(key, None)
    for row in report["predictions"]:
        row.pop("out_of_scope_paths", None)
    old = tmp_path / "old-run"
    old.mkdir()
    (old / "report.json").write_text(json.dumps(report))
    assert htmlreport_main([str(old)]) == 0
    page = (old / "report.html").read_text()
    assert "records no contract summaries" in page and "not recorded" in page
    assert page.count('<tr><td class="name">asyncodebench-demo:minicache</td>') == len(report["predictions"])
    # Written elsewhere, the artifact links still lead to the run folder.
    assert htmlreport_main([str(old / "report.json"), "-o", str(tmp_path / "pages" / "r.html")]) == 0
    assert 'href="../old-run/predictions/' in (tmp_path / "pages" / "r.html").read_text()


# --- release size ----------------------------------------------------------------------------------------------


def test_a_release_size_page_with_hostile_names(browser: Any, tmp_path: Path) -> None:
    """19 tasks x 5 protocols x 3 models, one model named with markup that would fetch and run if not escaped."""
    report = synthetic_report(models=("synth-model-a", HOSTILE_MODEL, "synth-model-c"))
    page_file = tmp_path / "report.html"
    page_file.write_text(render_report(report))
    opened = Opened(browser, page_file)
    try:
        opened.assert_clean()  # the hostile name neither fetched its image nor ran its handler
        _check_summary(opened, report)
        assert HOSTILE_MODEL in [cells[1] for cells in opened.rows("#predictions-table")]
        assert len(opened.rows("#infrastructure-table")) == report["counts"]["infrastructure_errors"] == 2
        opened.page.locator("#predictions-table thead th", has_text="DRS").locator("button").click()
        drs = [cells[9] for cells in opened.rows("#predictions-table")]
        numbers = [float(v) for v in drs if v not in ("n/a", "")]
        assert numbers == sorted(numbers) and drs[:len(numbers)] == [f"{v:.2f}" for v in numbers]  # unscored last
        print(f"screenshot: {opened.screenshot('report-synthetic.png')}")
    finally:
        opened.close()


def test_review_flags_show_hostile_patch_text_as_text(browser: Any, tmp_path: Path) -> None:
    """A flagged line is the patch's own text: it shows as a tooltip, never as markup, and fetches nothing."""
    from asyncodebench.reports.report import build_report
    from asyncodebench.reports.synthetic import synthetic_inputs, typed_results

    metadata, file, results = synthetic_inputs(tasks=3, points=6, models=("m1",), protocols=("single",))
    flag = {"file": "pkg/core.py", "line": 7, "marker": "os_exit", "text": HOSTILE_MODEL, "patch": "model_patch"}
    results[0]["integrity"]["review"] = {"count": 5, "flags": [flag] * 4}
    report = build_report(metadata, file, typed_results(results))
    page_file = tmp_path / "report.html"
    page_file.write_text(render_report(report))
    opened = Opened(browser, page_file)
    try:
        opened.assert_clean()
        labels = opened.page.eval_on_selector_all(
            "#predictions-table span.flag", "spans => spans.map(s => [s.textContent, s.title, s.className])")
        review = [entry for entry in labels if entry[0].startswith("review")]
        assert review == [["review os_exit pkg/core.py:7", HOSTILE_MODEL, "flag"]] * 3 + [
            ["review: 2 more", "listed in report.md and result.json", "flag"]]
        summary = opened.rows("#summary-table")
        assert summary[0][-1] == "1"  # predictions with review flags
    finally:
        opened.close()


# --- the comparison page ---------------------------------------------------------------------------------------


def test_the_comparison_page_shows_compare_json(browser: Any, tmp_path: Path) -> None:
    runs = [Run(f"synth{seed}", f"synth{seed}/report.json",
                synthetic_report(tasks=8, points=20, seed=seed, run_id=f"synth{seed}")) for seed in (0, 1)]
    record = compare_runs(runs)
    page_file = tmp_path / "compare.html"
    page_file.write_text(render_compare(record))
    opened = Opened(browser, page_file)
    try:
        opened.assert_clean()
        assert "same dataset" in opened.page.inner_text("#dataset-check")
        shown = opened.rows("#protocols-table")
        expected = [c for c in record["comparisons"] if c["view"] == "protocols"]
        assert len(shown) == len(expected)
        for cells, c in zip(shown, expected):
            assert cells[:3] == [c["a"]["subject"], display_name(c["b"]["protocol"]), c["metric"]]
            assert cells[3] == str(c["tasks"])
            scale, digits = (100, 1) if c["unit"] == "share" else (1, 2)
            if c["mean_difference"] is None:  # DRS and CAIL: single's T is 1, the others' more (nothing paired)
                assert cells[6] == "n/a" and cells[-1] == c["reading"] == "T differs: not compared"
                continue
            assert cells[6] == (f"{c['mean_difference'] * scale:+.{digits}f} [{c['ci_low'] * scale:+.{digits}f}, "
                                f"{c['ci_high'] * scale:+.{digits}f}]")
            assert cells[8] == f"{c['positive']} / {c['negative']} / {c['zero']}"
        assert len(opened.rows("#models-table")) == sum(c["view"] == "models" for c in record["comparisons"])
        assert len(opened.rows("#runs-table")) == sum(c["view"] == "runs" for c in record["comparisons"])
        opened.page.locator("#protocols-table thead th", has_text="difference").locator("button").click()
        differences = [float(cells[6].split(" ")[0]) for cells in opened.rows("#protocols-table") if cells[6] != "n/a"]
        assert differences[0] <= differences[-1] and differences[0] == min(differences)
        print(f"screenshot: {opened.screenshot('compare-synthetic.png')}")
    finally:
        opened.close()


# --- layout and access at a laptop's and a phone's width (issue 20) ----------------------------------------------

WIDTHS = [(1280, 800), (390, 844)]


def _synthetic_page(folder: Path) -> tuple[Path, dict[str, Any]]:
    report = synthetic_report()
    page_file = folder / "report.html"
    page_file.write_text(render_report(report))
    return page_file, report


def _compare_page(folder: Path) -> Path:
    runs = [Run(f"synth{seed}", f"synth{seed}/report.json",
                synthetic_report(tasks=8, points=20, seed=seed, run_id=f"synth{seed}")) for seed in (0, 1)]
    page_file = folder / "compare.html"
    page_file.write_text(render_compare(compare_runs(runs)))
    return page_file


def assert_fits_and_reads(opened: Opened, name: str) -> None:
    """No sideways scroll of the page, and (with every <details> open) captions, text alternatives, text sizes and
    contrast as helpers/page_checks.py checks them."""
    width = page_checks.page_width(opened.page)
    assert width["scroll"] <= width["viewport"], (width, page_checks.widest(opened.page))
    print(f"screenshot: {opened.screenshot(name)}")
    page_checks.open_all_details(opened.page)
    found = {check: items for check, items in page_checks.problems(opened.page).items() if items}
    assert found == {}
    opened.assert_clean()


def assert_headline_first(opened: Opened) -> None:
    """The headline is the first thing under the title and wholly inside the first screen (its table's first rows
    at least), and the key columns of the summary come first: the FSR column is in view without scrolling."""
    page = opened.page
    order = page.evaluate("() => Array.from(document.querySelectorAll('h1, main > section, h2')).map(e => e.id || "
                          "e.tagName)")
    assert order[:3] == ["H1", "headline", "headline-title"], order
    height = page.evaluate("window.innerHeight")
    for selector in ("#headline-title", "#headline-verdict"):
        box = page.locator(selector).bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height, (selector, box, height)
    first_row = page.locator("#headline-table tbody tr").first
    if first_row.count():
        box = first_row.bounding_box()
        assert box is not None and box["y"] + box["height"] <= height, (box, height)
    if page.evaluate("window.innerWidth") >= 1280:  # a laptop sees the whole summary, no sideways scroll in its box
        box = page.locator("#summary-table").locator("xpath=..")
        assert box.evaluate("box => box.scrollWidth <= box.clientWidth"), box.evaluate(
            "box => [box.scrollWidth, box.clientWidth]")
    fsr = page.locator("#summary-table thead th").nth(2)
    assert fsr.inner_text().startswith("FSR")
    box = fsr.bounding_box()
    assert box is not None and box["x"] + box["width"] <= page.evaluate("window.innerWidth")


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: f"{v[0]}px")
def test_the_demo_runs_page_fits_and_reads(shared_demo_run: EvalRun, browser: Any, viewport: tuple[int, int]) -> None:
    opened = Opened(browser, shared_demo_run.run_dir / "report.html", viewport=viewport)
    try:
        assert_headline_first(opened)
        # One task in the demo: said in words, nothing ranked.
        assert "one task" in opened.page.inner_text("#headline-verdict")
        assert opened.page.locator("#headline-table .rank").count() == 0
        assert_fits_and_reads(opened, f"report-demo-{viewport[0]}.png")
    finally:
        opened.close()


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: f"{v[0]}px")
def test_a_release_size_page_fits_and_reads(browser: Any, tmp_path: Path, viewport: tuple[int, int]) -> None:
    page_file, report = _synthetic_page(tmp_path)
    opened = Opened(browser, page_file, viewport=viewport)
    try:
        assert_headline_first(opened)
        headers = opened.page.eval_on_selector_all("#headline-table thead th", "ths => ths.map(t => t.textContent)")
        assert headers == ["model", "Overall", "Single", "Serial", "Async-Private", "Async-RO-Manager", "Async-Manager"]
        assert_fits_and_reads(opened, f"report-synthetic-{viewport[0]}.png")
    finally:
        opened.close()


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: f"{v[0]}px")
def test_the_comparison_page_fits_and_reads(browser: Any, tmp_path: Path, viewport: tuple[int, int]) -> None:
    opened = Opened(browser, _compare_page(tmp_path), viewport=viewport)
    try:
        assert "Async-RO-Manager" in [cells[1] for cells in opened.rows("#protocols-table")]
        assert_fits_and_reads(opened, f"compare-synthetic-{viewport[0]}.png")
    finally:
        opened.close()


def test_the_headline_ranks_the_synthetic_models_as_the_ranking_says(browser: Any, tmp_path: Path) -> None:
    from asyncodebench.reports.ranking import headline

    page_file, report = _synthetic_page(tmp_path)
    opened = Opened(browser, page_file, javascript=False)
    try:
        rankings = headline(report["predictions"], ("single", "serial_specialists", "async_private",
                                                    "caid_manager", "async_manager"))
        rows = {cells[0]: cells[1:] for cells in opened.rows("#headline-table")}
        assert list(rows) == [s.model for s in rankings[0].standings]  # in the overall order
        for column, ranking in enumerate(rankings):
            for s in ranking.standings:
                interval = f"[{s.ci_low * 100:.1f}, {s.ci_high * 100:.1f}]"
                assert rows[s.model][column] == f"{s.rank_text} {s.mean * 100:.1f} {interval}"
        leader = rankings[0].standings[0]
        verdict = " ".join(opened.page.inner_text("#headline-verdict").split())
        assert leader.model in verdict and f"{leader.mean * 100:.1f}" in verdict
        method = opened.page.inner_text("#headline-method")
        assert "10,000 resamples, seed 42" in method and "tie" in method
    finally:
        opened.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["script", "no-script"])
def test_a_summary_row_opens_its_predictions_in_the_page(shared_demo_run: EvalRun, browser: Any,
                                                         javascript: bool) -> None:
    """The model's name in a summary row opens that cell's predictions (a <details>): the outcome, the flags, the
    checkpoint timeline, the end of the evaluator output as text, links to the files; with or without script."""
    report = shared_demo_run.report
    row = next(p for p in report["predictions"] if p["model_name_or_path"] == "hostile-test-edit")
    assert row["output_tail"] and len(row["output_tail"]) <= 2048 and row["output_tail"].count("\n") < 30
    opened = Opened(browser, shared_demo_run.run_dir / "report.html", javascript=javascript, viewport=(390, 844))
    try:
        assert opened.page.locator("details.cell[open]").count() == 0
        opened.page.locator("#summary-table a", has_text="hostile-test-edit").click()
        cell = opened.page.locator("details.cell[open]")
        assert cell.count() == 1 and "hostile-test-edit" in cell.locator("summary").inner_text()
        tail = cell.locator("pre.tail")
        assert tail.is_visible() and tail.text_content() == row["output_tail"]
        assert "restored: tests/test_api.py" in cell.locator(".flags-line").inner_text()
        steps = cell.locator("ol.steps li")
        assert steps.count() == len(next(iter(row["dependency_trace"].values())))
        hrefs = cell.locator("p.links a").evaluate_all("links => links.map(a => a.href)")
        files = [Path(href.removeprefix("file://")) for href in hrefs if not href.endswith("/")]
        assert len(files) == 4 and all(f.is_file() for f in files)  # timeline, patch, result, output
        assert cell.locator("pre.tail").bounding_box()["width"] <= 390  # type: ignore[index]
        opened.assert_clean()
    finally:
        opened.close()


def test_hostile_evaluator_output_shows_as_text(browser: Any, tmp_path: Path) -> None:
    """The output tail is the evaluated code's output: markup in it is shown, never run or fetched."""
    from asyncodebench.reports.report import build_report
    from asyncodebench.reports.synthetic import synthetic_inputs, typed_results

    metadata, file, results = synthetic_inputs(tasks=2, points=2, models=("m1",), protocols=("single",))
    report = build_report(metadata, file, typed_results(results))
    hostile = f"collected 3 items\n</pre></details><script>console.error('ran')</script>{HOSTILE_MODEL}\nFAILED"
    report["predictions"][0]["output_tail"] = hostile
    page_file = tmp_path / "report.html"
    page_file.write_text(render_report(report))
    opened = Opened(browser, page_file)
    try:
        opened.page.locator("details.cell summary").first.click()
        assert opened.page.locator("details.cell[open] pre.tail").text_content() == hostile
        opened.assert_clean()
    finally:
        opened.close()


def test_chromium_is_what_setup_installs() -> None:
    """The browser the tests drive is the one scripts/setup_machine.sh installs on a fresh machine."""
    setup = (ROOT / "scripts" / "setup_machine.sh").read_text()
    assert " chromium" in setup.split("for pkg in", 1)[1].splitlines()[0]
    assert shutil.which("chromium") == str(CHROMIUM)
