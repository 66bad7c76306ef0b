"""timeline.html (issue 32) on synthetic scenarios, no Docker: one page per scenario with every agent's responses,
the manager's actions, the merges and each dependency point's first passing steps on one axis, held to the
result's DRS and CAIL numbers; the page passes the Chromium checks at 1280 and 390 px, reads with JavaScript off,
shows a hostile trajectory as text within 2 MB, and is drawn for a prediction with checkpoints only.
(tests/test_run_agents.py and tests/test_run_agents_managers.py check the pages of the suite's agents runs.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from helpers.checkout import ROOT, script_env
from helpers.timeline_checks import (
    WIDTHS,
    assert_fits_and_reads,
    assert_probes_match,
    lane_names,
    opened,
    response_marks,
)
from helpers.timeline_scenario import MERGES, Scenario, write_scenario

from asyncodebench.reports.timeline import Sources, build_timeline
from asyncodebench.reports.timeline_files import write_run_timelines

PAGE_LIMIT = 2 * 1024 * 1024
HOSTILE_TEXT = ("<script>console.error('ran')</script><img src=\"http://127.0.0.1:9/x.png\" "
                "onerror=\"console.error('img')\">\x1b]0;pwned\x07\x1b[31mred\u202eevil")


def written(scenario: Scenario) -> Path:
    report = json.loads((scenario.run_dir / "report.json").read_text())
    assert write_run_timelines(scenario.run_dir, report) == [scenario.page]
    return scenario.page


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    made = write_scenario(tmp_path)
    written(made)
    return made


def test_the_page_shows_lanes_arrows_merges_and_probe_rows_on_one_axis(scenario: Scenario, browser: Any) -> None:
    with opened(browser, scenario.page) as page:
        assert lane_names(page) == ["manager", "core_agent", "api_agent", "cli_agent", "integrated state"]
        # every model response of the three specialists (6 each) and the manager's 3
        assert response_marks(page) == 3 * 6 + 3
        assert page.locator("svg.tl rect.mc").count() == 3 * 6  # each command
        assert page.locator("svg.tl rect.mc.bad").count() == 3  # exit 1 at responses 0 of each agent
        arrows = page.eval_on_selector_all("#arrow-table tbody tr", "rs => rs.map(r => r.cells[0].textContent)")
        assert arrows == ["message", "hand-off", "rerun", "undelivered"]
        assert page.locator("svg.tl line.arrow").count() == 4
        merges = page.eval_on_selector_all("#merge-table tbody tr",
                                           "rs => rs.map(r => [r.cells[1].textContent, r.cells[2].textContent, "
                                           "r.cells[3].textContent])")
        assert merges == [[agent, "clean" if status == "clean" else "conflict (merge_conflict)", ", ".join(files)]
                          for agent, status, _, files, _ in MERGES]
        assert page.locator("svg.tl rect.merge.g-bad").count() == 1
        assert page.locator("svg.tl circle.final").count() == 1
        assert_probes_match(page, scenario.result)
        # the SAD-proxy candidate sits on the consumer's lane at the response that defined it (the 4th of 6)
        assert "first defined by cli_agent in response 4" in page.inner_text("#sad-list")
        assert page.locator("svg.tl path.sad").count() == 1
        verdict = page.inner_text("#verdict")
        assert "model_failure:tests_failed" in verdict and "20 / 25" in verdict and "verified" in verdict
        assert "1 merge conflict(s) (runner's record)" in verdict  # the report row's flags
        assert page.locator("#missing").count() == 0  # nothing is missing from this run


def test_marks_follow_the_wall_clock(scenario: Scenario) -> None:
    """A response's mark is left of a later one's, across lanes: the axis is the time the trajectories recorded."""
    report = json.loads((scenario.run_dir / "report.json").read_text())
    from asyncodebench.reports.timeline_files import prediction_sources

    line = json.loads((scenario.agents_run / "predictions.jsonl").read_text())
    timeline = build_timeline(prediction_sources(scenario.folder, scenario.run_dir, line, scenario.agents_run,
                                                 row=report["predictions"][0]))
    assert timeline.axis == "wall clock" and timeline.start == "2026-12-07T09:00:00+00:00"
    core = [e.at for e in timeline.lanes[1].runs[0].entries if e.kind == "response"]
    assert core == sorted(core) and core[0] is not None and 2 < core[0] < core[-1] < 29
    final = timeline.checkpoints[-1]
    # seconds from the first recorded time: the manager started at 0.5 s
    assert (final.kind, final.at) == ("final_integrated", 72.5)
    assert [m.at for m in timeline.merges] == [31.5, 51.5, 71.5]
    assert [m.step for m in timeline.merges] == [2, 4, 6]


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: f"{v[0]}px")
def test_the_page_fits_and_reads(scenario: Scenario, browser: Any, viewport: tuple[int, int]) -> None:
    with opened(browser, scenario.page, viewport) as page:
        assert_fits_and_reads(page, f"timeline-synthetic-{viewport[0]}.png")
        box = page.locator("#picture .scroll")
        # the lanes are wider than a phone: they scroll inside their box
        if viewport[0] < 800:
            assert box.evaluate("b => b.scrollWidth > b.clientWidth")


def test_the_picture_reads_with_javascript_off_and_a_mark_opens_its_entry(scenario: Scenario, browser: Any) -> None:
    with opened(browser, scenario.page, javascript=False) as page:
        assert page.locator("svg.tl").is_visible()
        assert response_marks(page) == 21
        assert_probes_match(page, scenario.result)
    with opened(browser, scenario.page) as page:
        target = page.locator("svg.tl a:has(circle.mr)").nth(4)
        entry_id = target.get_attribute("href")[1:]
        assert page.locator(f"#{entry_id}").evaluate("d => d.open") is False
        target.click()
        assert page.locator(f"#{entry_id}").evaluate("d => d.open") is True
        assert "model response" in page.locator(f"#{entry_id} summary").inner_text()


def test_a_hostile_trajectory_shows_as_text_within_the_size_bound(tmp_path: Path, browser: Any) -> None:
    """HTML, terminal escapes, a bidi override and `javascript:` names in every text of the run, and 5 MB of output
    per command: shown as text, nothing runs or is fetched, links stay in the run folder, the page under 2 MB."""
    names = ("javascript:alert(1)", "<i onmouseover=alert(1)>api", "cli\x1b[2J")
    scenario = write_scenario(tmp_path, responses=2, output="y" * (5 * 1024 * 1024), text=HOSTILE_TEXT,
                              agent_names=names)
    page_file = written(scenario)
    html = page_file.read_text()
    assert page_file.stat().st_size < PAGE_LIMIT
    assert "\x1b" not in html and "\u202e" not in html and "<script>console" not in html
    with opened(browser, page_file) as page:
        assert page.evaluate("document.scripts.length") == 1  # the page's own
        assert page.locator("img, [onerror]").count() == 0
        assert "<script>console.error('ran')</script>" in page.locator("details.entry pre").first.text_content()
        hrefs = page.eval_on_selector_all("a[href]", "as => as.map(a => a.getAttribute('href'))")
        assert hrefs and not any(h.lower().startswith(("javascript:", "data:", "http")) for h in hrefs)
        trajectories = page.eval_on_selector_all("#entries a[href]", "as => as.map(a => a.href)")
        # a link to each trajectory but the one whose name holds an escape (no link for such a name)
        assert len(trajectories) == 3 and all(Path(unquote(h.removeprefix("file://"))).is_file() for h in trajectories)
        assert "javascript:alert(1)" in lane_names(page)
        output = page.locator("details.out").first
        assert "more in the full trajectory" in output.locator("summary").text_content()


def test_a_100_response_scenario_stays_under_2_mb(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, responses=100, output="z" * 50_000, text="t" * 5_000)
    page_file = written(scenario)
    size = page_file.stat().st_size
    print(f"timeline.html of 3 agents x 100 responses (50 kB outputs): {size} bytes")
    assert size < PAGE_LIMIT


def test_a_prediction_with_checkpoints_only_shows_its_probe_rows_and_says_what_is_missing(
        tmp_path: Path, browser: Any) -> None:
    """A line with checkpoints but no runner record or trajectories (another runner's, upstream-layout records
    without agent ids): the probe rows and the checkpoints on a step axis, and the page says what is missing."""
    scenario = write_scenario(tmp_path)
    line = {k: v for k, v in scenario.line.items() if k not in ("runner", "trajectories")}
    (scenario.agents_run / "predictions.jsonl").write_text(json.dumps(line) + "\n")
    records = [json.loads(r) for r in (scenario.folder / "dependency_probe_checkpoints.jsonl").read_text().splitlines()]
    for record in records:
        record.pop("agent_id")
    (scenario.folder / "dependency_probe_checkpoints.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    shutil.rmtree(scenario.agents_run / "scenarios")
    page_file = written(scenario)
    with opened(browser, page_file) as page:
        missing = page.inner_text("#missing")
        assert "no agent trajectories" in missing and "no runner events" in missing
        assert "sequence of checkpoint steps" in page.inner_text("main > p.lead")
        assert_probes_match(page, scenario.result)
        assert page.locator("#checkpoint-table tbody tr").count() == 7
        # the merges as the result records them, at their checkpoint steps, their files not recorded
        merges = page.eval_on_selector_all("#merge-table tbody tr", "rs => rs.map(r => [r.cells[1].textContent, "
                                           "r.cells[3].textContent, r.cells[6].textContent])")
        assert merges == [["core_agent", "not recorded", "2"], ["api_agent", "not recorded", "4"],
                          ["cli_agent", "not recorded", "6"]]
        assert response_marks(page) == 0
        assert_fits_and_reads(page, "timeline-checkpoints-only-1280.png")


def test_named_trajectories_that_are_not_there_are_said_missing(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path)
    shutil.rmtree(scenario.agents_run / "scenarios")
    html = written(scenario).read_text()
    assert "4 trajectory file(s) the line names were not found" in html and "--agents-run" in html


def test_values_of_the_wrong_type_make_a_page_not_a_crash() -> None:
    garbage: Any = {"run_metrics": {"dependencies": [{"dependency_id": 3, "up": "1", "drs": True}, "x"]},
                    "trust": [], "sad_proxy": {"candidates": [["a"], 5, ["f", "s"]]}, "integration": "no",
                    "status": None}
    line: Any = {"runner": {"events": [{"event": "message_sent", "time": 5}, "x", {"event": "integration_after_merge",
                                                                                   "out_of_scope": "abc"}],
                            "agents": "none"}, "trajectories": {"a": 1}}
    timeline = build_timeline(Sources(garbage, [{"logical_step": "2"}, {"logical_step": 1}], line,
                                      [("a", None, [{"type": "response", "commands": "ls", "time": "bad"}], None)]))
    assert timeline.axis == "sequence" and timeline.probes[0].up is None and timeline.probes[0].drs is None
    from asyncodebench.reports.htmltimeline import render_timeline

    assert "<html" in render_timeline(timeline)


def test_show_run_writes_the_page_of_one_scenario_and_prints_its_path(scenario: Scenario) -> None:
    scenario.page.unlink()
    script = str(ROOT / "scripts" / "show_run.py")
    done = subprocess.run([sys.executable, script, str(scenario.run_dir), "--scenario",
                           "asyncodebench-demo:minicache/async_manager"], capture_output=True, text=True,
                          env=script_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(scenario.page) and scenario.page.is_file()
    wrong = subprocess.run([sys.executable, script, str(scenario.run_dir), "--scenario", "no/such"],
                           capture_output=True, text=True, env=script_env(), timeout=300)
    assert wrong.returncode == 2 and "no prediction" in wrong.stderr
    missing = subprocess.run([sys.executable, script, str(scenario.root)], capture_output=True, text=True,
                             env=script_env(), timeout=300)
    assert missing.returncode == 2 and "report.json" in missing.stderr


def test_the_timeline_modules_load_neither_the_runner_nor_the_agents() -> None:
    """Layers: the pages read files and records; they never import the run or agents packages (nor do what they
    import), so a timeline is drawn from any run folder without the machinery that made it."""
    check = ("import sys, asyncodebench.reports.timeline_files; "
             "print(sorted(m for m in sys.modules if m.startswith(('asyncodebench.run', 'asyncodebench.agents'))))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=script_env(),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
