"""The content audit's records (data/tasks/<name>.audit.yaml): one per task, complete and consistent with the task.

What an examiner can recheck quickly only helps if it is whole: every task has a record, every dependency point's
contract summary was audited, the verdicts add up to the summary, the revisions are the task's, and no claim was
left open without a reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from asyncodebench.dataset.validation import validator
from asyncodebench.images.claims import claim_set, latest_runs, load_record_file, markdown_table, stale_claims

TASKS = Path(__file__).resolve().parent.parent / "data" / "tasks"
NAMES = sorted(p.name[:-len(".audit.yaml")] for p in TASKS.glob("*.audit.yaml"))
SOURCES = sorted(p.stem for p in TASKS.glob("*.yaml") if p.name.count(".") == 1)


def test_every_task_has_an_audit_record() -> None:
    assert len(SOURCES) == 19 and NAMES == SOURCES


@pytest.mark.parametrize("name", NAMES)
def test_an_audit_record_is_complete(name: str) -> None:
    record = yaml.safe_load((TASKS / f"{name}.audit.yaml").read_text())
    errors = [e.message for e in validator("audit_record").iter_errors(record)]
    assert not errors, errors
    task = yaml.safe_load((TASKS / f"{name}.yaml").read_text())
    assert record["task_id"] == task["task_id"] and record["revisions"]["base"] == task["base_revision"]
    dependency_ids = {d["dependency_id"] for d in task["dependencies"]}
    audited = Counter(c["where"] for c in record["claims"])
    assert set(audited) - {"statement"} == dependency_ids  # every contract summary, nothing unknown
    assert audited["statement"] > 0
    verdicts = Counter(c["verdict"] for c in record["claims"])
    assert record["summary"] == {"claims": len(record["claims"]), "verified": verdicts["verified"],
                                 "corrected": verdicts["corrected"], "unverifiable": verdicts["unverifiable"]}
    assert len({c["id"] for c in record["claims"]}) == len(record["claims"])
    # Claims that cannot be checked here depend on what is not available offline: the overlays' contents and the
    # official (TVM) images.
    assert all(any(w in c["reason"].lower() for w in ("overlay", "image"))
               for c in record["claims"] if c["verdict"] == "unverifiable")
    if "probe_discrimination" in record:
        assert set(record["probe_discrimination"]["points"]) == dependency_ids


TVM = {n for n in NAMES if n.startswith("apache-tvm-")}


@pytest.mark.parametrize("name", NAMES)
def test_every_claim_runs_or_says_why(name: str) -> None:
    """Each claim of a task whose image runs here has checks or a reason it cannot run; TVM's say they were read."""
    record = yaml.safe_load((TASKS / f"{name}.audit.yaml").read_text())
    if name in TVM:
        assert "image" in record["checks_by_reading"] and not claim_set(record).checks
        return
    assert "checks_by_reading" not in record
    silent = [c["id"] for c in record["claims"] if not c.get("checks") and not c.get("not_executable")]
    assert not silent, f"claims with neither checks nor a not_executable reason: {silent}"


@pytest.mark.parametrize("name", NAMES)
def test_the_recorded_check_run_covers_the_checks_as_they_are(name: str) -> None:
    """data/claim_checks.json holds, for every claim, a run of exactly its checks as they are now (per-claim digests
    of the full run or of a later rerun of that claim), in which every check passed."""
    record = yaml.safe_load((TASKS / f"{name}.audit.yaml").read_text())
    claims = claim_set(record)
    entry = load_record_file()[record["task_id"]]
    assert entry["digest"] == claims.digest, "checks changed since the recorded run: rerun scripts/check_claims.py"
    assert entry["claims"] == claims.claims and entry["checks"] == len(claims.checks)
    if name in TVM:
        assert entry["checked_by_reading"] == record["checks_by_reading"]
        return
    stale = stale_claims(claims, entry)
    assert not stale, f"claims whose checks changed since they last ran: {stale}; rerun scripts/check_claims.py"
    assert entry["failing_claims"] == [] and entry["passing_claims"] == len(claims.executable)
    assert all(run["failing_claims"] == [] for run in latest_runs(entry).values())
    assert entry.get("checks_passed", len(claims.checks)) == len(claims.checks) and entry["image"]
    assert all(run["image"] and run["ran_on"] for run in entry.get("reruns", []))


@pytest.mark.parametrize("name", NAMES)
def test_no_verified_or_corrected_claim_has_a_check_its_wrong_variant_passes(name: str) -> None:
    """A claim with a deliberately wrong variant recorded beside it: in the run that last ran its checks (the digest
    covers the variant, so the variant is the one there now), at least one check failed with the wrong rule in
    place. A check that passes unchanged on the wrong rule cannot catch the error the claim is about."""
    record = yaml.safe_load((TASKS / f"{name}.audit.yaml").read_text())
    claims = claim_set(record)
    if not claims.variants:
        return
    entry = load_record_file()[record["task_id"]]
    assert not stale_claims(claims, entry), "rerun scripts/check_claims.py"
    latest = latest_runs(entry)
    for variant in claims.variants:
        if claims.verdicts[variant.claim_id] in ("verified", "corrected"):
            missed = latest[variant.claim_id]["wrong_variants_missed"]
            assert variant.claim_id not in missed, (
                f"{name} {variant.claim_id}: every check passes with the wrong rule '{variant.rule}' in place")


def test_the_wrong_variant_test_fails_on_a_check_that_cannot_catch_it() -> None:
    """The record test above reads what the runner recorded; a run whose variant passed every check is reported."""
    from asyncodebench.images.claims import Check, CheckResult, missed_variants

    check = Check("S1", 0, "reference", "print(1)", "1")
    caught = [CheckResult(check, "passed", 0, "1", ""), CheckResult(check, "failed", 0, "2", "", True)]
    missed = [CheckResult(check, "passed", 0, "1", ""), CheckResult(check, "passed", 0, "1", "", True)]
    assert missed_variants(caught) == [] and missed_variants(missed) == ["S1"]


def test_the_readme_gives_the_recorded_check_summary() -> None:
    readme = (TASKS.parent.parent / "README.md").read_text()
    assert markdown_table(load_record_file()) in readme


def test_every_point_of_the_commit0_tasks_is_attributed_and_the_page_shows_it() -> None:
    from asyncodebench.dataset.rows import load_published
    from asyncodebench.images import attribution

    rows = load_published(str(TASKS.parent.parent)).rows
    points = attribution.load_record_file()
    commit0 = {d["dependency_id"] for d in rows.dependencies if not d["task_id"].startswith("asyncodebench:apache-tvm")}
    assert len(rows.dependencies) == 52 and set(points) == commit0
    assert all(p["groups"]["upstream"]["traced"] for p in points.values())
    page = (TASKS.parent.parent / "docs" / "probe_attribution.md").read_text()
    assert attribution.markdown_table(points, rows.dependencies) in page


def test_a_flagged_point_says_so_in_its_audit_note_and_in_the_limitations() -> None:
    """The card counts the flagged points and links the limitations in detail (docs/dataset_creation.md), which name
    each one."""
    from asyncodebench.dataset.rows import load_published
    from asyncodebench.images import attribution

    rows = load_published(str(TASKS.parent.parent)).rows
    points = attribution.load_record_file()
    notes = {d["dependency_id"]: d["audit_note"] or "" for d in rows.dependencies}
    root = TASKS.parent.parent
    card = (root / "README.md").read_text().split("## Bias, risks and limitations", 1)[1]
    card = card.split("### Recommendations", 1)[0]
    detail = (root / "docs" / "dataset_creation.md").read_text().split("## Limitations in detail", 1)[1]
    flagged = attribution.flagged(points)
    assert flagged  # the measurement found some; an empty list would mean the check never ran
    assert f"at {len(flagged)} points" in card and "docs/dataset_creation.md#limitations-in-detail" in card
    for dep_id in flagged:
        assert attribution.note(points[dep_id]) in notes[dep_id]
        assert f"`{dep_id}`" in detail.split("\n## ", 1)[0]
