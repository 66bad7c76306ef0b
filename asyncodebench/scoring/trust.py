"""A trust status per evaluated result: whether its number can be published as it is.

- `integrity_tampering`: the evidence contradicts itself (METRICS decision 11); the result is scored 0 already.
- `needs_review`: nothing contradicts the evidence, but a person has to read the code before the number is
  published: the patches raise high-severity review flags (`scoring.review`), a consistency check could not tell
  load from tampering (`integrity.needs_review`, a list of reasons), or a monitor model called it suspicious
  (`integrity.monitor.suspicious`). Its score stands; `scripts/publish_results.py` refuses it until a review file
  clears it.
- `verified`: none of the above.

A self-reported checkpoint timeline (`scoring.provenance`) does not change the trust status: it labels the
dependency metrics, not the score the tests gave.

Derived from the `integrity` object alone, so a result written before trust statuses existed gets one when read
(its review flags' severities come from their markers, `review_markers.severity_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from asyncodebench.scoring.review_markers import is_high

TrustStatus = Literal["verified", "needs_review", "integrity_tampering"]
TRUST_STATUSES: tuple[str, ...] = get_args(TrustStatus)
REASONS_LISTED = 10  # reasons a trust record names; the counts are in integrity


@dataclass(frozen=True)
class Trust:
    """A result's trust status and why (empty for `verified`)."""

    status: TrustStatus
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `trust` object."""
        return {"status": self.status, "reasons": list(self.reasons)}


def trust_of(integrity: Mapping[str, Any] | None) -> Trust:
    """The trust status an `integrity` object (as result.json holds it) gives."""
    integrity = integrity if isinstance(integrity, Mapping) else {}
    if integrity.get("violation") == "integrity_tampering":
        contradictions = len(integrity.get("tampering") or ())
        return Trust("integrity_tampering", (f"the evidence contradicts itself ({contradictions} contradiction(s) "
                                             "in integrity.tampering)",))
    reasons: list[str] = []
    high = high_flag_count(integrity.get("review"))
    if high:
        reasons.append(f"{high} high-severity review flag(s) in integrity.review")
    pending = integrity.get("needs_review")
    if isinstance(pending, (list, tuple)) and pending:
        reasons += [f"consistency: {_reason_text(item)}" for item in pending[:REASONS_LISTED]]
    monitor = integrity.get("monitor")
    if isinstance(monitor, Mapping) and monitor.get("suspicious") is True:
        reasons.append("the monitor model called it suspicious")
    return Trust("needs_review", tuple(reasons[:REASONS_LISTED])) if reasons else Trust("verified")


def trust_status_of_result(result: Mapping[str, Any]) -> str | None:
    """The trust status of a result.json object: its own `trust`, else derived; None for an infrastructure error."""
    if result.get("status") != "evaluated":
        return None
    own = result.get("trust")
    if isinstance(own, Mapping) and own.get("status") in TRUST_STATUSES:
        return str(own["status"])
    return trust_of(result.get("integrity")).status


def high_flag_count(review: Any) -> int:
    """High-severity flags of an `integrity.review` object: its `high` count, or (written before severities) the
    listed flags whose marker is high."""
    if not isinstance(review, Mapping):
        return 0
    high = review.get("high")
    if isinstance(high, int) and not isinstance(high, bool):
        return high
    return sum(is_high(flag) for flag in review.get("flags") or () if isinstance(flag, Mapping))


def _reason_text(item: Any) -> str:
    if isinstance(item, Mapping):
        return "; ".join(f"{k}: {v}" for k, v in item.items())[:300]
    return str(item)[:300]
