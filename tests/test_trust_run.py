"""Trust statuses from a real evaluate.py run on the demo task (Docker): the gold patch is `verified`, targeted
attacks are `needs_review` or `integrity_tampering` (never `verified`) whatever they score, and the reports count
them per cell. Kept small (three predictions, no probes): the per-marker analysis is in test_review_analysis.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID
from helpers.demo_run import EvalRun
from helpers.payloads.hostile import PatchMaker
from helpers.payloads.review import review_attack_patches

ATTACKS = ("always-equal", "meta-path-config-hook-wrapper")


@pytest.fixture(scope="module")
def trust_run(demo_dataset: Any, evaluate: Callable[..., EvalRun]) -> Iterator[EvalRun]:
    make = PatchMaker()
    try:
        patches = review_attack_patches(make)
    finally:
        make.close()
    gold = (DEMO_DIR / "patches" / "gold.patch").read_text()
    lines = [{"task_id": DEMO_TASK_ID, "protocol": "single", "model_name_or_path": "gold", "model_patch": gold}]
    lines += [{"task_id": DEMO_TASK_ID, "protocol": "single", "model_name_or_path": name,
               "model_patch": patches[name]} for name in ATTACKS]
    yield evaluate(lines, demo_dataset.path, "--no-probes", "--timeout", "60")


def test_gold_is_verified_and_targeted_attacks_are_held(trust_run: EvalRun) -> None:
    gold = trust_run.result("gold")
    assert gold["trust"] == {"status": "verified", "reasons": []}
    assert (gold["final_success"], gold["integrity"]["review"]["high"]) == (True, 0)
    for name in ATTACKS:
        result = trust_run.result(name)
        assert result["status"] == "evaluated", name
        assert result["trust"]["status"] in ("needs_review", "integrity_tampering"), (name, result["trust"])
        assert result["integrity"]["review"]["high"] >= 1, name
        assert trust_run.row(name)["trust_status"] == result["trust"]["status"]


def test_the_reports_count_the_statuses_per_cell(trust_run: EvalRun) -> None:
    counts: dict[str, int] = {}
    for row in trust_run.report["summary"]:
        for status, n in row["trust"].items():
            counts[status] = counts.get(status, 0) + n
    assert counts["verified"] == 1 and counts["needs_review"] + counts["integrity_tampering"] == len(ATTACKS)
    markdown = (trust_run.run_dir / "report.md").read_text()
    assert "### Trust" in markdown
    assert 'id="trust-table"' in (trust_run.run_dir / "report.html").read_text()
