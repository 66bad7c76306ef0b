"""Review flags (`integrity.review`): added code that touches the test runner's machinery, shown in every report and
never scored. No Docker: the analysis is pure work over text, and the reports are built from synthetic results.
The analysis per marker, its severities and the trust status are in tests/test_review_analysis.py."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from asyncodebench.reports.flags import row_flags
from asyncodebench.reports.htmlreport import render_report
from asyncodebench.reports.report import build_report, code_span, markdown, summarize
from asyncodebench.reports.synthetic import synthetic_inputs, typed_results
from asyncodebench.run.predictions import Checkpoint, Prediction
from asyncodebench.scoring.review import (
    REVIEW_CAP,
    TEXT_LIMIT,
    added_lines,
    line_markers,
    patch_flags,
    review_patches,
    review_prediction,
)

ROOT = Path(__file__).resolve().parent.parent
DEMO_PATCHES = sorted((ROOT / "data" / "demo" / "patches").glob("*.patch"))

TAMPERING = '''\
diff --git a/pkg/core.py b/pkg/core.py
index 1111111..2222222 100644
--- a/pkg/core.py
+++ b/pkg/core.py
@@ -10,6 +10,12 @@ class Cache:
     def get(self, key):
         return self._data[key]
 
+import _pytest.outcomes
+import sys, gc
+sys.modules["json"] = object()
+builtins.open = lambda *a: None
+def helper():
+    os._exit(0)
     def put(self, key, value):
-        self._data[key] = value
+        self._data[key] = value  # unchanged behaviour
 
@@ -40,3 +46,5 @@ def make_key(args):
     return tuple(args)
+setattr(builtins, "print", print)
+exec("x = 1")
diff --git a/pkg/api.py b/pkg/api.py
new file mode 100644
--- /dev/null
+++ b/pkg/api.py
@@ -0,0 +1,4 @@
+from pluggy import HookimplMarker
+import atexit as _a, ctypes
+sys.settrace(None); f.__code__ = g.__code__
+raise __import__("unittest").SkipTest("later")
'''  # noqa: W293 (a diff's blank context line is one space)


def _flags(patch: str) -> set[tuple[str, int | None, str]]:
    return {(f["file"], f["line"], f["marker"]) for f in patch_flags(patch)}


def test_markers_are_found_at_their_file_and_new_line() -> None:
    assert _flags(TAMPERING) == {
        ("pkg/core.py", 13, "import_pytest_internals"), ("pkg/core.py", 14, "import_gc"),
        ("pkg/core.py", 15, "sys_modules_write"), ("pkg/core.py", 16, "builtins_write"),
        ("pkg/core.py", 18, "os_exit"), ("pkg/core.py", 47, "builtins_write"), ("pkg/core.py", 48, "dynamic_code"),
        ("pkg/api.py", 1, "import_pluggy"), ("pkg/api.py", 2, "atexit"), ("pkg/api.py", 2, "ctypes"),
        ("pkg/api.py", 3, "trace_hook"), ("pkg/api.py", 3, "code_object"), ("pkg/api.py", 4, "skip_from_code"),
    }
    first = patch_flags(TAMPERING)[0]
    assert first == {"file": "pkg/core.py", "line": 13, "marker": "import_pytest_internals",
                     "text": "import _pytest.outcomes", "severity": "high"}


@pytest.mark.parametrize("patch", DEMO_PATCHES, ids=lambda p: p.name)
def test_the_demo_patches_raise_no_high_flag(patch: Path) -> None:
    """Honest patches: at most a low flag (syntax_error.patch's lines do not parse on their own)."""
    assert [f for f in patch_flags(patch.read_text()) if f["severity"] == "high"] == []


@pytest.mark.parametrize(("line", "markers"), [
    ("from _pytest.python import Function", {"import_pytest_internals"}),
    ("x = __import__('pytest_jsonreport.plugin')", {"import_pytest_jsonreport", "pytest_by_name"}),
    ("mod = importlib.import_module(\"pluggy\")", {"import_pluggy", "pytest_by_name"}),
    ("if True: import gc", {"import_gc"}),
    ("objs = gc.get_objects()", {"gc_introspection"}),
    ("sys.modules.update(fake)", {"sys_modules_write"}),
    ("del sys.modules['pytest']", {"sys_modules_write", "pytest_by_name"}),
    ("__builtins__['open'] = fake", {"builtins_write"}),
    ("vars(builtins)['open'] = fake", {"builtins_write"}),
    ("atexit.register(_spoil)", {"atexit"}),
    ("_a.register(_spoil)  # atexit", set()),  # a comment is no code: `import atexit as _a` is what gets flagged
    ("from os import _exit", {"os_exit"}),
    ("__import__('os')._exit(0)", {"os_exit"}),
    ("code = compile(source, 'x', 'exec')", {"dynamic_code"}),
    ("threading.setprofile(hook)", {"trace_hook"}),
    ("setattr(func, '__code__', other)", {"code_object"}),
    ("name = os.environ['PYTEST_CURRENT_TEST']", {"pytest_env"}),
    ("pytest.xfail('not yet')", {"skip_from_code", "pytest_by_name"}),
    ("import pytest", {"pytest_in_code"}),
    # Honest lines that look alike.
    ("pattern = re.compile(r'\\d+')", set()),
    ("value = ast.literal_eval(text)", set()),
    ("def compile(self, source):", set()),
    ("if builtins.open == fake:", set()),
    ("self._exit()", set()),
    ("print('Skipped 3 items')", set()),
    ("from . import gc", set()),
    ("# import gc", set()),
])
def test_one_line_markers(line: str, markers: set[str]) -> None:
    assert {marker for marker, _ in line_markers(line)} == markers


def test_pytest_and_skips_in_test_files_are_not_flagged() -> None:
    """Tests import pytest and skip by design; only code under test doing so is worth a reader's look."""
    for line in ("import pytest", "pytest.skip('slow')", "raise unittest.SkipTest('x')"):
        assert line_markers(line, in_test_file=True) == []
    patch = "--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1,2 @@\n+import pytest\n+pytest.skip('x')\n"
    assert patch_flags(patch) == []


def test_git_metadata_files_are_flagged_whole() -> None:
    patch = ('diff --git a/.gitattributes b/.gitattributes\nnew file mode 100644\n--- /dev/null\n'
             '+++ b/.gitattributes\n@@ -0,0 +1 @@\n+*.py filter=evil\n'
             'diff --git a/x b/sub/.gitmodules\nrename from x\nrename to sub/.gitmodules\n'
             'diff --git "a/\\056gitattributes" "b/\\056gitattributes"\n')
    found = [(f["file"], f["line"], f["marker"]) for f in patch_flags(patch)]
    assert found == [(".gitattributes", None, "git_metadata_file"), ("sub/.gitmodules", None, "git_metadata_file")]


def test_a_context_diff_and_a_quoted_name_are_read() -> None:
    context = ("*** a/pkg/core.py\n--- b/pkg/core.py\n***************\n*** 1,2 ****\n  a = 1\n! b = 2\n"
               "--- 1,3 ----\n  a = 1\n! import ctypes\n+ import gc\n")
    assert _flags(context) == {("pkg/core.py", 2, "ctypes"), ("pkg/core.py", 3, "import_gc")}
    quoted = 'diff --git "a/p\\303\\244.py" "b/p\\303\\244.py"\n--- "a/p\\303\\244.py"\n+++ "b/p\\303\\244.py"\n' \
             "@@ -1 +1 @@\n-x\n+import gc\n"
    assert _flags(quoted) == {("pä.py", 1, "import_gc")}


def test_added_lines_follow_the_hunk_counts_not_the_line_prefixes() -> None:
    """An added line `++ b/other.py` reads `+++ b/other.py` in the diff: it is a line, not a new file header."""
    patch = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n a\n+++ b/other.py\n+import gc\n b\n"
    assert [(a.file, a.line, a.text) for a in added_lines(patch)] == [("x.py", 2, "++ b/other.py"),
                                                                     ("x.py", 3, "import gc")]


def test_a_long_line_keeps_the_hit_in_its_excerpt() -> None:
    line = "x = 1; " * 200 + "os._exit(3)" + "; y = 2" * 200
    ((marker, text),) = line_markers(line)
    assert marker == "os_exit" and "os._exit(3)" in text and len(text) <= TEXT_LIMIT


GARBAGE: list[Any] = [
    None, 3, b"@@ -1 +1 @@\n+import gc\n", ["+import gc"], "", "\n\n\n", "@@", "@@ -1 +1 @@", "@@ -x +y @@\n+a",
    "@@ -1,99999999999 +1,99999999999 @@\n+import gc\n", "+++ \n@@ -0,0 +1 @@\n+import gc",
    'diff --git "a/\\', 'diff --git "a/\\777\\400" b/x\n+++ "b/\\3', "--- 1,2 ----\n! import gc",
    "*** \n--- \n", "\udcff\udc80\ud800" * 50, "\x00\x01\x7f" * 100, "@@ -0,0 +1 @@\n+\udcffimport gc\x00",
    "+++ b/" + "a" * 100_000 + "\n@@ -0,0 +1 @@\n+import gc\n",
]


@pytest.mark.parametrize("patch", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_never_raises_and_gives_printable_json(patch: Any) -> None:
    found = patch_flags(patch)
    text = json.dumps(found, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate survives
    assert all(ord(c) >= 32 or c in "\t\n" for f in found for c in f["text"] + f["file"])
    assert all(len(f["file"]) <= 300 and len(f["text"]) <= TEXT_LIMIT for f in found)


def test_random_patches_never_raise() -> None:
    rng = random.Random(12)
    pieces = ["+", "-", " ", "@@ -1,3 +1,4 @@", "@@ -0,0 +1 @@", "\n", "+++ b/x.py", "--- a/x.py", "*** ",
              "--- 1,2 ----",
              'diff --git "a/\\3', "import gc", "sys.modules[", "\\", "\udcff", "\x00", ".gitattributes", ";", ":"]
    for _ in range(2000):
        patch = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
        for flag in patch_flags(patch):
            assert flag["marker"] != "review_incomplete", patch


def test_the_scan_stays_linear_on_hostile_lines() -> None:
    lines = ["import " * 100_000, "sys.modules[" * 100_000, "setattr(" * 100_000, "__import__(" * 100_000]
    patch = "--- a/x.py\n+++ b/x.py\n@@ -0,0 +1,4 @@\n" + "".join(f"+{line}\n" for line in lines)
    started = time.monotonic()
    patch_flags(patch)
    assert time.monotonic() - started < 10


def _prediction(**fields: Any) -> Prediction:
    base = {"line": 1, "task_id": "asyncodebench-demo:minicache", "protocol": "single", "model": "m", "run_id": None,
            "model_patch": "", "checkpoints": (), "agent_patches": {}, "usage": {}}
    return Prediction(**{**base, **fields})


def test_every_patch_of_a_prediction_is_scanned_once_per_flag() -> None:
    state = "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1,2 @@\n a\n+import gc\n"
    checkpoints = (Checkpoint("agent_artifact", "agent_workspace", "core", state),
                   Checkpoint("final_integrated", "integrated_workspace", None,
                              state + "+++ b/pkg/api.py\n@@ -0,0 +1 @@\n+import ctypes\n"))
    review = review_prediction(_prediction(checkpoints=checkpoints))
    assert (review["count"], review["high"]) == (2, 0)  # the final state repeats the first state's line: kept once
    assert [(f["marker"], f["patch"]) for f in review["flags"]] == [
        ("import_gc", "checkpoint 1 (agent_artifact, core)"), ("ctypes", "checkpoint 2 (final_integrated)")]
    agents = review_prediction(_prediction(agent_patches={"api_agent": "@@ -0,0 +1 @@\n+import atexit\n",
                                                          "core_agent": None}))
    assert [(f["marker"], f["patch"]) for f in agents["flags"]] == [("atexit", "agent_patches[api_agent]")]
    assert review_prediction(_prediction(model_patch=TAMPERING))["count"] == 13
    assert review_prediction(object()) == {"count": 0, "high": 0, "flags": []}


def test_the_flags_are_capped_and_the_count_is_complete() -> None:
    patch = "--- a/x.py\n+++ b/x.py\n@@ -0,0 +1,250 @@\n" + "".join(f"+import gc  # {i}\n" for i in range(250))
    review = review_patches([("model_patch", patch)])
    assert review["count"] == 250 and len(review["flags"]) == REVIEW_CAP


# --- the reports show them, and never score them ---------------------------------------------------------------

HOSTILE_TEXT = '<img src="http://127.0.0.1:9/r.png" onerror="console.error(1)"> `x` | y'
SMALL = {"tasks": 4, "points": 6, "models": ("m1", "m2"), "protocols": ("single", "async_private")}


def _results(every: int | None = None) -> list[dict[str, Any]]:
    """Synthetic result records; with `every`, each `every`-th evaluated one carries 30 review flags (25 listed)."""
    _, _, results = synthetic_inputs(**SMALL)
    for number, result in enumerate(results):
        if every and result["status"] == "evaluated" and number % every == 0:
            flags = [{"file": "pkg/core.py", "line": 7 + i, "marker": "os_exit", "text": HOSTILE_TEXT,
                      "patch": "model_patch"} for i in range(25)]
            result["integrity"]["review"] = {"count": 30, "flags": flags}
    return results


def _report_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    metadata, file, _ = synthetic_inputs(**SMALL)
    return build_report(metadata, file, typed_results(results))  # validated against schemas/report.schema.json


def test_reports_show_review_flags_and_validate() -> None:
    results = _results(every=7)
    report = _report_of(results)
    flagged = [p for p in report["predictions"] if p.get("review_flag_count")]
    assert flagged and all(p["review_flag_count"] == 30 and len(p["review_flags"]) == 20 for p in flagged)
    assert sum(r["review_flagged"] for r in report["summary"]) == len(flagged)
    text = markdown(report)
    assert "## Review flags (shown, never scored)" in text and "review: 27 more" in text
    assert "- `pkg/core.py:7` os_exit ``" + HOSTILE_TEXT.replace("\n", " ") + "`` (model_patch)" in text
    assert "- ... and 10 more" in text
    labels = row_flags(flagged[0])
    assert ("review os_exit pkg/core.py:7", False, HOSTILE_TEXT) in labels
    assert ("review: 27 more", False, "listed in report.md and result.json") in labels
    page = render_report(report)
    assert "review os_exit pkg/core.py:7" in page and HOSTILE_TEXT not in page  # escaped in the tooltip


def test_review_flags_never_change_a_score() -> None:
    plain = _results()
    flagged = _results(every=1)
    assert all((r.get("integrity") or {}).get("review") for r in flagged if r["status"] == "evaluated")
    drop = ("review_flagged", "trust")  # shown and counted, never a score
    assert [{k: v for k, v in row.items() if k not in drop} for row in summarize(typed_results(flagged))] == \
           [{k: v for k, v in row.items() if k not in drop} for row in summarize(typed_results(plain))]


def test_results_made_before_review_flags_show_none() -> None:
    report = _report_of(_results())
    row = next(p for p in report["predictions"] if p["status"] == "evaluated")
    assert (row["review_flag_count"], row["review_flags"], row["newly_skipped_count"]) == (None, [], None)
    assert "## Review flags" not in markdown(report)


@pytest.mark.parametrize(("text", "span"), [("a", "`a`"), ("a`b", "``a`b``"), ("`a", "`` `a ``"),
                                            ("x ``` y", "````x ``` y````"), ("", "` `")])
def test_code_spans_cannot_be_ended_by_their_text(text: str, span: str) -> None:
    assert code_span(text) == span
