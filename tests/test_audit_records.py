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
