"""The claim-check runner and the probe attribution, run for real on the demo image rebuilt from its recipe.

Checks run in the task's container as the sandbox user with no network, at the reference state (the complete code)
or at base; a check that prints something else, or crashes, fails and is shown; the record file takes what ran.
The attribution traces each probe group and credits the executed lines to the agents owning the files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.checkout import script_env
from helpers.dataset_folders import DemoDataset, RebuiltDemo

from asyncodebench.images import attribution, claims

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
TASK = "asyncodebench-demo:minicache"

CLAIMS = [
    {"id": "S1", "where": "statement", "claim": "make_key ignores keyword order", "verdict": "verified",
     "evidence": "minicache/core.py@reference",
     "checks": [{"at": "reference", "code": "from minicache.core import make_key\n"
                                            "print(make_key((1,), {'a': 1, 'b': 2})"
                                            " == make_key((1,), {'b': 2, 'a': 1}))",
                 "expect": "True"}],
     # Keys that keep keyword order: the check compares two orders, so it fails on this rule (caught).
     "wrong_variant": {"rule": "make_key keeps keyword order",
                       "prelude": "import minicache.core as m\n"
                                  "m.make_key = lambda args, kwargs, typed=False: (args, tuple(kwargs.items()))"}},
    {"id": "S2", "where": "statement", "claim": "make_key is a stub at base", "verdict": "verified",
     "evidence": "minicache/core.py@base",
     "checks": [{"at": "base", "code": "from minicache.core import make_key\ntry:\n    make_key((), {})\n"
                                       "except NotImplementedError as e:\n    print(type(e).__name__)",
                 "expect": "NotImplementedError"}]},
    {"id": "S3", "where": "statement", "claim": "a wrong claim: typed keys are equal", "verdict": "verified",
     "evidence": "minicache/core.py@reference",
     "checks": [{"at": "reference", "code": "from minicache.core import make_key\n"
                                            "print(make_key((1,), {}, True) == make_key((1.0,), {}, True))",
                 "expect": "True"}]},
    {"id": "S4", "where": "statement", "claim": "a check that crashes", "verdict": "verified", "evidence": "x",
     "checks": [{"at": "reference", "code": "import minicache.nothing_here", "expect": ""}]},
    {"id": "S5", "where": "statement", "claim": "checks run unprivileged, without network", "verdict": "verified",
     "evidence": "x",
     "checks": [{"at": "base", "code": "import os, socket\nprint(os.getuid() != 0)\ntry:\n"
                                       "    socket.create_connection(('1.1.1.1', 53), timeout=3)\n    print('online')\n"
                                       "except OSError:\n    print('offline')",
                 "expect": "True\noffline"}]},
    {"id": "S6", "where": "statement", "claim": "core_agent owns core.py", "verdict": "verified", "evidence": "x",
     "not_executable": "ownership: a fact of the task's assignment, not behaviour"},
    # A one-case check: equal calls give equal keys holds for a make_key that ignores its arguments too (missed).
    {"id": "S7", "where": "statement", "claim": "make_key tells calls apart by their arguments", "verdict": "verified",
     "evidence": "minicache/core.py@reference",
     "checks": [{"at": "reference", "code": "from minicache.core import make_key\n"
                                            "print(make_key((1,), {}) == make_key((1,), {}))",
                 "expect": "True"}],
     "wrong_variant": {"rule": "make_key gives one key for every call",
                       "prelude": "import minicache.core as m\nm.make_key = lambda *args, **kwargs: 0"}},
]


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory: pytest.TempPathFactory, rebuilt_demo: RebuiltDemo) -> Path:
    folder = tmp_path_factory.mktemp("audit")
    record = {"task_id": TASK, "claims": CLAIMS}
    (folder / "minicache.audit.yaml").write_text(yaml.safe_dump(record, sort_keys=False))
    return folder


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True,
                          env=script_env(), timeout=900)


def test_claim_checks_run_in_the_sandbox_and_failures_show(audit_dir: Path, rebuilt_demo: RebuiltDemo,
                                                           demo_dataset: DemoDataset, tmp_path: Path) -> None:
    record_file = tmp_path / "claim_checks.json"
    common = [TASK, "--images", str(rebuilt_demo.map_path), "--dataset", str(demo_dataset.path), "--repo-pattern",
              str(rebuilt_demo.repo), "--reference-revision", rebuilt_demo.reference, "--audit-dir", str(audit_dir),
              "--out", str(tmp_path / "out")]
    done = run_script("check_claims.py", *common, "--record", str(record_file))
    assert done.returncode == 1, done.stderr
    assert "S3#0 at reference: failed (exit 0)" in done.stdout and "printed:  'False'" in done.stdout
    assert "S4#0 at reference: failed (exit 1)" in done.stdout and "ModuleNotFoundError" in done.stdout
    assert "S1#0" not in done.stdout and "S2#0" not in done.stdout and "S5#0" not in done.stdout
    assert "wrong variant of S7 not caught" in done.stdout and "wrong variant of S1" not in done.stdout
    entry = claims.load_record_file(record_file)[TASK]
    assert entry["failing_claims"] == ["S3", "S4"] and entry["passing_claims"] == 4
    assert entry["claims"] == 7 and entry["executable"] == 6 and entry["not_executable"] == 1
    assert entry["wrong_variants"] == 2 and entry["wrong_variants_missed"] == ["S7"]
    assert entry["image"] == rebuilt_demo.pinned_ref
    claim_set = claims.claim_set(yaml.safe_load((audit_dir / "minicache.audit.yaml").read_text()))
    assert entry["digest"] == claim_set.digest and claims.stale_claims(claim_set, entry) == []
    ran = json.loads((tmp_path / "out" / "minicache.json").read_text())["results"]
    s1_wrong = [r for r in ran if r["claim"] == "S1" and r["wrong_variant"]]
    assert [r["outcome"] for r in s1_wrong] == ["failed"] and s1_wrong[0]["stdout"].strip() == "False"
    assert "| minicache | 7 | 6 | 4 | 1 | 0 |" in done.stdout
    passing = run_script("check_claims.py", *common, "--claims", "S1", "S2", "S5", "--record", str(record_file))
    assert passing.returncode == 0, passing.stdout + passing.stderr
    rerun = claims.load_record_file(record_file)[TASK]["reruns"][-1]
    assert sorted(rerun["claim_digests"]) == ["S1", "S2", "S5"] and rerun["overlays"] == "applied"
    assert rerun["failing_claims"] == [] and rerun["wrong_variants_missed"] == []


def test_the_attribution_credits_each_probe_group_to_the_files_it_runs(rebuilt_demo: RebuiltDemo,
                                                                         demo_dataset: DemoDataset,
                                                                         tmp_path: Path) -> None:
    done = run_script("attribute_probes.py", TASK, "--images", str(rebuilt_demo.map_path), "--dataset",
                      str(demo_dataset.path), "--repo-pattern", str(rebuilt_demo.repo), "--reference-revision",
                      rebuilt_demo.reference, "--out", str(tmp_path), "--record", str(tmp_path / "record.json"))
    assert done.returncode in (0, 1), done.stderr
    points = json.loads((tmp_path / "attribution.json").read_text())
    assert points == attribution.load_record_file(tmp_path / "record.json")
    key = points["minicache.core_to_api.call_key_contract"]
    up, down = key["groups"]["upstream"], key["groups"]["downstream"]
    # The upstream probes call core.make_key only; the downstream ones go through api.memoize into core.
    assert up["traced"] and up["lines_by_agent"]["core_agent"] > 0 and up["lines_by_agent"]["api_agent"] == 0
    assert set(up["files"]) == {"minicache/core.py"} and key["verdict"] == "measures_producer"
    assert down["lines_by_agent"]["api_agent"] > 0 and "minicache/api.py" in down["files"]
    assert attribution.markdown_table(points) in done.stdout
