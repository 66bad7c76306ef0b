"""The HTML pages (issue 12): report.html of a real run and of a release-size synthetic run, and compare.html,
opened in headless Chromium (Debian's, driven by Playwright; it cannot download a browser here).

Each page must load with no console error and no request but its own file, show the numbers of its JSON, sort and
filter, and read with JavaScript off. Screenshots are kept in build/test-artifacts/ (git-ignored) for people to look
at: report-demo.png, report-synthetic.png, compare-synthetic.png.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers.checkout import ROOT
from helpers.demo_run import EvalRun

from asyncodebench.reports.compare import Run, compare_runs
from asyncodebench.reports.htmlcompare import render_compare
from asyncodebench.reports.htmlreport import main as htmlreport_main
from asyncodebench.reports.htmlreport import render_report
from asyncodebench.reports.synthetic import synthetic_report

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "build" / "test-artifacts"
# What a CI machine can run: no sandbox as root, no GPU, and nothing that phones home on start.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
HOSTILE_MODEL = '<img src="http://127.0.0.1:9/x.png" onerror="console.error(\'ran\')">'


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the whole session; missing Chromium or Playwright fails, never skips."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` "
                    "(scripts/setup_machine.sh does)", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: run scripts/install_python_env.sh (test extras)", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Opened:
    """A page as loaded, with every request it made and every console error or uncaught exception."""

    def __init__(self, browser: Any, path: Path, javascript: bool = True) -> None:
        self.context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1400, "height": 900})
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
    shown = {(cells[0], cells[1]): cells for cells in opened.rows("#summary-table")}
    assert len(shown) == len(report["summary"])
    for row in report["summary"]:
        cells = shown[(row["model_name_or_path"], row["protocol"])]
        assert cells[2:4] == [str(row["tasks"]), str(row["evaluated"])]
        assert cells[4] == _estimate_text(row["fsr"], 100, 1)
        assert cells[5] == _estimate_text(row["mean_pass_rate"], 100, 1)
        assert cells[6] == _estimate_text(row["mean_adpr"], 100, 1)
        assert cells[8] == _estimate_text(row["mean_drs_penalized"], 1, 2)
        assert cells[10] == _estimate_text(row["mean_cail_penalized"], 1, 2)
        assert cells[11] == str(row["infrastructure_errors"])


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
            assert cells[:3] == [p["task_id"], p["model_name_or_path"], p["protocol"]]
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
    from asyncodebench.reports.synthetic import synthetic_inputs

    metadata, file, results = synthetic_inputs(tasks=3, points=6, models=("m1",), protocols=("single",))
    flag = {"file": "pkg/core.py", "line": 7, "marker": "os_exit", "text": HOSTILE_MODEL, "patch": "model_patch"}
    results[0]["integrity"]["review"] = {"count": 5, "flags": [flag] * 4}
    report = build_report(metadata, file, results)
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
            assert cells[:3] == [c["a"]["subject"], c["b"]["protocol"], c["metric"]]
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


def test_chromium_is_what_setup_installs() -> None:
    """The browser the tests drive is the one scripts/setup_machine.sh installs on a fresh machine."""
    setup = (ROOT / "scripts" / "setup_machine.sh").read_text()
    assert " chromium" in setup.split("for pkg in", 1)[1].splitlines()[0]
    assert shutil.which("chromium") == str(CHROMIUM)
