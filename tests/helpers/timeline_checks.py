"""Checks of a timeline.html page loaded in headless Chromium: it fetched nothing and raised nothing, it fits its
viewport (the lanes scroll in their own box) and reads (helpers/page_checks.py), and its numbers are the result's.
Shared by the synthetic tests (tests/test_timeline.py) and the agents runs' (tests/test_run_agents*.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from asyncodebench.reports.htmlreport import prediction_folder
from asyncodebench.reports.timeline import ARROWS
from helpers import page_checks
from helpers.checkout import ROOT, SCRIPTS, script_env

ARTIFACTS = ROOT / "build" / "test-artifacts"
WIDTHS = ((1280, 800), (390, 844))


@contextmanager
def opened(browser: Any, path: Path, viewport: tuple[int, int] = (1280, 800),
           javascript: bool = True) -> Iterator[Any]:
    """The loaded page; on leaving, no console error, no uncaught exception and no request but the page's own."""
    context = browser.new_context(java_script_enabled=javascript,
                                  viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    url = path.resolve().as_uri()
    page.goto(url, wait_until="load")
    try:
        yield page
        assert errors == []
        assert requests == [url], "the page fetched something besides itself"
    finally:
        context.close()


def assert_fits_and_reads(page: Any, name: str) -> None:
    """No sideways scroll of the page (the lanes scroll inside their box), and with every <details> open:
    captions, text alternatives, named scroll boxes, text of 10 px or more, contrast of 4.5:1 or more."""
    width = page_checks.page_width(page)
    assert width["scroll"] <= width["viewport"], (width, page_checks.widest(page))
    box = page.locator("#picture .scroll")
    assert box.evaluate("b => b.clientWidth <= window.innerWidth")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name))
    page_checks.open_all_details(page)
    found = {check: items for check, items in page_checks.problems(page).items() if items}
    assert found == {}


def probe_table(page: Any) -> dict[str, dict[str, str]]:
    """The dependency points table as text: id -> U, D, DRS, CAIL, final."""
    rows = page.eval_on_selector_all("#probe-table tbody tr",
                                     "rows => rows.map(r => Array.from(r.cells).map(c => c.textContent.trim()))")
    return {r[0]: {"U": r[2], "D": r[3], "DRS": r[4], "CAIL": r[5], "final": r[6]} for r in rows}


def _cell(value: Any, missing: str) -> str:
    return missing if value is None else str(value)


def assert_probes_match(page: Any, result: dict[str, Any]) -> None:
    """Each dependency point's row and its marks on the axis are the result's run_metrics: U, D, the DRS step (its
    I mark), the CAIL gap (drawn when both U and D were observed) and resolved or not."""
    table = probe_table(page)
    metrics = result["run_metrics"]["dependencies"]
    assert set(table) == {d["dependency_id"] for d in metrics}
    for dep in metrics:
        assert table[dep["dependency_id"]] == {
            "U": _cell(dep["up"], "never"), "D": _cell(dep["down"], "never"), "DRS": _cell(dep["drs"], "never"),
            "CAIL": _cell(dep["cail_raw"], "unresolved"), "final": "resolved" if dep["resolved"] else "unresolved"}
    firsts = page.eval_on_selector_all("svg.tl circle.pi title", "ts => ts.map(t => t.textContent)")
    assert sorted(firsts) == sorted(f"I first passed at step {d['drs']}" for d in metrics if d["drs"])
    gaps = page.eval_on_selector_all("svg.tl line.cail title", "ts => ts.map(t => t.textContent)")
    assert sorted(gaps) == sorted(f"CAIL gap: {d['cail_raw']} step(s) from producer to consumer" for d in metrics
                                  if d["cail_raw"])
    unresolved = page.locator("svg.tl text.unresolved").count()
    assert unresolved == sum(not d["resolved"] for d in metrics)


def lane_names(page: Any) -> list[str]:
    return page.eval_on_selector_all("svg.tl text.lane title", "ts => ts.map(t => t.textContent)")


def response_marks(page: Any) -> int:
    return page.locator("svg.tl circle.mr").count()


def check_agent_run_pages(browser: Any, eval_dir: Path, agents_runs: list[Path], name: str) -> int:
    """The timeline of every prediction of an evaluated agents run: evaluate.py wrote one into each prediction's
    folder; scripts/show_run.py, told where the agents' run folders are, redraws them with the trajectories. Each
    page shows every model response of the line (its `usage.model_calls`), a lane per agent and the manager, each
    merge and manager action the runner recorded, and the result's DRS and CAIL numbers; it passes the Chromium
    checks at both widths. The number of pages checked."""
    report = json.loads((eval_dir / "report.json").read_text())
    rows = report["predictions"]
    for row in rows:  # evaluate.py's own pages: the concatenated predictions file names no reachable trajectory
        assert "were not found beside its predictions file" in (eval_dir / prediction_folder(row) / "timeline.html"
                                                                 ).read_text()
    flags = [arg for run in agents_runs for arg in ("--agents-run", str(run))]
    done = subprocess.run([sys.executable, str(SCRIPTS / "show_run.py"), str(eval_dir), *flags],
                          capture_output=True, text=True, env=script_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.split()) == len(rows)
    lines = Path(report["run"]["predictions_file"]["path"]).read_text().splitlines()
    for row in rows:
        line = json.loads(lines[row["line"] - 1])
        result = json.loads((eval_dir / prediction_folder(row) / "result.json").read_text())
        page_file = eval_dir / prediction_folder(row) / "timeline.html"
        agents = {a["agent_id"] for a in line["runner"]["agents"]}
        with opened(browser, page_file) as page:
            assert page.locator("#missing").count() == 0, page.inner_text("#missing")
            assert set(lane_names(page)) == agents | {"integrated state"}
            assert response_marks(page) == line["usage"]["model_calls"]
            assert page.locator("#merge-table tbody tr").count() == len(line["runner"]["merges"])
            assert page.locator("svg.tl line.arrow").count() == sum(
                e["event"] in ARROWS for e in line["runner"]["events"])
            assert_probes_match(page, result)
        for viewport in WIDTHS:
            with opened(browser, page_file, viewport) as page:
                assert_fits_and_reads(page, f"timeline-{name}-{row['protocol']}-{row['line']}-{viewport[0]}.png")
    return len(rows)
