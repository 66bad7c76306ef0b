"""Bad input to the publishing and comparison scripts (compare.py, publish.py, publish_results.py): each case ends in
one clear message saying what to do and a documented exit code, never a traceback, and writes nothing.

Every case runs the real script in a subprocess with no Hub reachable (HF_ENDPOINT on a closed port) and no token;
the valid reports are small synthetic ones (reports/synthetic.py). Docker-free."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.checkout import script_env

from asyncodebench.reports.compare import COMPARE_SCHEMA_VERSION
from asyncodebench.reports.report import REPORT_SCHEMA_VERSION
from asyncodebench.reports.synthetic import synthetic_report

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    """One bad input: the script, its arguments (built in a scratch folder), the exit code and what stderr says."""

    script: str
    args: Callable[[Path], list[str]]
    code: int
    says: str


def _report(**changes: Any) -> dict[str, Any]:
    report = synthetic_report(tasks=3, points=3, models=("m",), protocols=("single", "async_private"),
                              infrastructure_errors=0)
    report["run"].update(changes)
    return report


def _run(where: Path, name: str, content: Any) -> str:
    folder = where / name
    folder.mkdir()
    text = content if isinstance(content, (str, bytes)) else json.dumps(content)
    (folder / "report.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(folder)


def _good(where: Path, name: str = "good") -> str:
    return _run(where, name, _report())


def _file(where: Path) -> str:
    (where / "afile").write_text("x", encoding="utf-8")
    return str(where / "afile")


def _older_kit(where: Path) -> str:
    report = _report(run_id="older")
    report["run"]["tool"] = {**report["run"]["tool"], "version": "0.3.0"}
    return _run(where, "older", report)


def _older_format(where: Path) -> str:
    """A report an older kit wrote, without the summary, labelled with the current schema version."""
    report = _report(run_id="old-format")
    del report["summary"]
    return _run(where, "old", report)


def _non_empty(where: Path) -> str:
    (where / "hub").mkdir()
    (where / "hub" / "notes.txt").write_text("keep", encoding="utf-8")
    return str(where / "hub")


def _folder(where: Path, name: str) -> str:
    (where / name).mkdir()
    return str(where / name)


def _json_is_a_folder(where: Path) -> str:
    _folder(where, "out.json")
    return str(where / "out.html")


HTML = "out.html"
CASES = {
    # compare.py
    "compare: report is not JSON": Case("compare.py", lambda w: [_run(w, "r", "{"), "-o", str(w / HTML)], 2,
                                        "cannot read a run report"),
    "compare: report is a list": Case("compare.py", lambda w: [_run(w, "r", "[1]"), "-o", str(w / HTML)], 2,
                                      "not a run report"),
    "compare: predictions of the wrong shape": Case(
        "compare.py", lambda w: [_run(w, "r", {"run": {"run_id": "x"}, "predictions": "x"}), "-o", str(w / HTML)], 2,
        "not a run report of this kit's format"),
    "compare: prediction rows without fields": Case(
        "compare.py", lambda w: [_run(w, "r", {"run": {"run_id": "x", "dataset": {}}, "predictions": [{"a": 1}]}),
                                 "-o", str(w / HTML)], 2, "--rescore"),
    "compare: run without an id": Case("compare.py", lambda w: [_run(w, "r", {"run": {}, "predictions": []}), "-o",
                                                                str(w / HTML)], 2, "not a run report"),
    "compare: run is a string": Case("compare.py", lambda w: [_run(w, "r", {"run": "x", "predictions": []}), "-o",
                                                              str(w / HTML)], 2, "not a run report"),
    "compare: report not UTF-8": Case("compare.py", lambda w: [_run(w, "r", b"\xff\xfe{"), "-o", str(w / HTML)], 2,
                                      "cannot read a run report"),
    "compare: no such run": Case("compare.py", lambda w: [str(w / "nothere"), "-o", str(w / HTML)], 2,
                                 "cannot read a run report"),
    "compare: -o is a folder": Case("compare.py", lambda w: [_good(w), "-o", _folder(w, HTML)], 2, "is a folder"),
    "compare: -o's .json is a folder": Case("compare.py", lambda w: [_good(w), "-o", _json_is_a_folder(w)], 2,
                                            "is a folder"),
    "compare: -o under a file": Case("compare.py", lambda w: [_good(w), "-o", _file(w) + "/" + HTML], 2,
                                     "not a folder"),
    "compare: -o not .html": Case("compare.py", lambda w: [_good(w), "-o", str(w / "out.txt")], 2, ".html"),
    "compare: kits mixed": Case("compare.py", lambda w: [_good(w), _older_kit(w), "-o", str(w / HTML)], 2,
                                "--allow-mixed"),
    "compare: older format, same version": Case("compare.py", lambda w: [_good(w), _older_format(w), "-o",
                                                                         str(w / HTML)], 2, "'summary'"),
    # publish.py
    "publish: folder not empty": Case("publish.py", lambda w: [_non_empty(w), "--dry-run"], 2, "not empty"),
    "publish: folder is a file": Case("publish.py", lambda w: [_file(w), "--dry-run"], 2, "is a file"),
    "publish: folder cannot be made": Case("publish.py", lambda w: [_file(w) + "/hub", "--dry-run"], 2,
                                           "cannot write"),
    "publish: repo id with a space": Case("publish.py", lambda w: [str(w / "hub"), "--dry-run", "--dataset",
                                                                   "bad id!!"], 2, "ORG/NAME"),
    "publish: repo id without org": Case("publish.py", lambda w: [str(w / "hub"), "--dry-run", "--repo-id",
                                                                  "AsynCodeBench"], 2, "ORG/NAME"),
    "publish: tag with a space": Case("publish.py", lambda w: [str(w / "hub"), "--dry-run", "--revision", "v 1"], 2,
                                      "not a usable tag"),
    "publish: tag with ..": Case("publish.py", lambda w: [str(w / "hub"), "--dry-run", "--tag", "v0..4"], 2,
                                 "not a usable tag"),
    "publish: no token": Case("publish.py", lambda w: [str(w / "hub")], 2, "hf auth login"),
    # publish_results.py
    "results: report not UTF-8": Case("publish_results.py", lambda w: [_run(w, "r", b"\xff\xfe{"), "--model-repo",
                                                                       "a/b"], 2, "not a valid run report"),
    "results: report is a list": Case("publish_results.py", lambda w: [_run(w, "r", "[1]"), "--model-repo", "a/b"],
                                      2, "not a valid run report"),
    "results: run folder is a file": Case("publish_results.py", lambda w: [_file(w), "--model-repo", "a/b"], 2,
                                          "not a folder"),
    "results: --output-dir is a file": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                             "--output-dir", _file(w)], 2,
                                            "is a file"),
    "results: review file is a folder": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                              "--review-file", str(w)], 2,
                                             "cannot read the review file"),
    "results: review file not JSON": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                           "--review-file", _file(w)], 2,
                                          "not a valid review file"),
    "results: bad --dataset": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                       "--dataset", "bad id!!"], 2, "ORG/NAME"),
    "results: tag as --revision": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                                "--revision", "v0.4.2"], 2,
                                               "40-hex commit"),
    "results: unknown --model": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b", "--model",
                                                                      "zzz"], 2, "has no model"),
    "results: --allow-partial with --output-dir": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                                 "--allow-partial", "--output-dir",
                                                                                 str(w / "o")], 2, "dry run only"),
    "results: --create-pr without --push": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                                 "--create-pr"], 2, "--push"),
    "results: --push without a token": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b",
                                                                             "--push"], 2, "hf auth login"),
    "results: Hub unreachable": Case("publish_results.py", lambda w: [_good(w), "--model-repo", "a/b"], 3,
                                     "127.0.0.1:9"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_gets_one_clear_message_and_no_traceback(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    work = tmp_path / "w"
    work.mkdir()
    args = case.args(work)
    before = sorted(p.relative_to(work) for p in work.rglob("*"))
    env = {k: v for k, v in script_env().items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / case.script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == case.code, (done.stdout[-1000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "error" in done.stderr.lower(), done.stderr[-2000:]
    assert case.says in done.stderr, done.stderr[-2000:]
    after = sorted(p.relative_to(work) for p in work.rglob("*"))
    made = [p for p in after if p not in before and not (work / p).is_dir()]
    assert made == [], made  # nothing written (publish.py may create its new, empty folder)


def test_runs_of_different_kits_are_compared_with_allow_mixed_and_labelled(tmp_path: Path) -> None:
    out = tmp_path / "mixed.html"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), _good(tmp_path),
                           _older_kit(tmp_path), "-o", str(out), "--allow-mixed"], cwd=ROOT, env=script_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    record = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert record["kit_check"]["consistent"] is False and record["kit_check"]["allowed_mixed"] is True
    assert "kit 0.3.0" in record["kit_check"]["message"] and "Compared anyway" in done.stdout
    assert 'id="kit-check"' in out.read_text(encoding="utf-8")


def _shape(node: Any) -> Any:
    """A schema without its prose (descriptions, titles), so only a change of fields or rules changes its digest."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items() if k not in ("description", "title", "$comment")}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return node


# The schema version each output format has with the fields it has now. Changing a schema's fields or rules changes
# its digest: bump the version it declares (and its writer's constant), then record the new pair here.
SCHEMA_VERSIONS = {"report": ("1.1", "489cdf3488b4c72a"), "compare": ("2.1", "5ef4c69bc8c59eb8")}


@pytest.mark.parametrize("name", sorted(SCHEMA_VERSIONS))
def test_a_schema_whose_fields_change_gets_a_new_version(name: str) -> None:
    import hashlib

    schema = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))
    version = schema["properties"]["schema_version"]["const"]
    digest = hashlib.sha256(json.dumps(_shape(schema), sort_keys=True).encode()).hexdigest()[:16]
    recorded_version, recorded_digest = SCHEMA_VERSIONS[name]
    assert (version, digest) == (recorded_version, recorded_digest) or version != recorded_version, (
        f"schemas/{name}.schema.json changed its fields (digest {digest}) but still declares version {version}: "
        "bump the version, then record the new version and digest in SCHEMA_VERSIONS")
    assert version == recorded_version, f"record {name} {version} and digest {digest} in SCHEMA_VERSIONS"
    assert version == {"report": REPORT_SCHEMA_VERSION, "compare": COMPARE_SCHEMA_VERSION}[name]  # what is written
