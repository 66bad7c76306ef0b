"""What one prediction's report row flags, in one list that the Markdown and the HTML report both show.

A flag is serious when it comes from a rule that changes the score (an integrity violation, a newly skipped test,
an unreadable report, an agent's scope violation); the others point a reader at something to check. Review flags
are never serious: they name added lines to read and never change a score.
"""

from __future__ import annotations

from typing import Any, NamedTuple

PATHS_NAMED = 3  # paths the agent runner dropped, named in a flag's label
REVIEW_FLAGS_SHOWN = 3  # review flags named in a row; the rest are counted (all are in report.md and result.json)


class Flag(NamedTuple):
    """One flag of a row: its label, whether it is serious, and more words for a tooltip."""

    label: str
    serious: bool
    detail: str  # more words for a tooltip; "" when the label says it all


def row_flags(row: dict[str, Any]) -> list[Flag]:
    """Every flag of a report row (see `report.prediction_row`), serious ones first in rule order."""
    found = []
    if row.get("integrity_violation"):
        found.append(Flag(row["integrity_violation"], True, ""))
    if row.get("newly_skipped_count"):
        found.append(Flag(f"{row['newly_skipped_count']} newly skipped or xfailed", True,
                          "tests skipped or xfailed here that were not at base (ids in result.json)"))
    if row.get("report_problem"):
        found.append(Flag(f"report {row['report_problem']}", True, ""))
    reported = " (runner's record)" if row.get("integration_source") == "runner" else ""
    if row.get("scope_violations"):
        found.append(Flag(f"{row['scope_violations']} agent scope violation(s){reported}", True, ""))
    if row.get("out_of_scope_paths"):
        found.append(Flag(f"{len(row['out_of_scope_paths'])} path(s) outside the writable paths", False,
                          ", ".join(row["out_of_scope_paths"])))
    dropped = row.get("dropped_by_runner") or []
    if dropped:  # named in the label too: report.md shows labels only
        named = ", ".join(dropped[:PATHS_NAMED]) + (", ..." if len(dropped) > PATHS_NAMED else "")
        found.append(Flag(f"{len(dropped)} path(s) dropped by the agent runner ({named})", False,
                          "outside the writable paths, left out of the patch before it was scored: "
                          + ", ".join(dropped)))
    if row.get("hazards_removed"):
        found.append(Flag(f"removed: {', '.join(row['hazards_removed'])}", False, ""))
    if row.get("restored_paths"):
        found.append(Flag(f"restored: {', '.join(row['restored_paths'])}", False, ""))
    if row.get("merge_conflicts"):
        found.append(Flag(f"{row['merge_conflicts']} merge conflict(s){reported}", False, ""))
    if row.get("image_provenance") not in (None, "official"):
        found.append(Flag(f"image {row['image_provenance']}", False, ""))
    final_build = (row.get("build") or {}).get("final")
    if final_build and final_build["status"] != "built":
        found.append(Flag(f"native build {final_build['status']} (exit {final_build['exit_code']})", True,
                          f"the build's output ends: {final_build['output_tail'][-300:]}"))
    if row.get("trust_status") == "needs_review":
        found.append(Flag("needs review", False, "high-severity review flags or an open consistency question: "
                                                 "read the flagged code before publishing the score"))
    if row.get("timeline_source") == "self_reported":
        found.append(Flag("timeline self-reported", False,
                          "DRS, DRE, CAIL and the SAD proxy rest on checkpoints nothing ties to a recorded run: "
                          f"{row.get('timeline_reason') or ''}"))
    monitor = row.get("monitor")
    if monitor and monitor["suspicious"]:
        found.append(Flag("monitor: suspicious", False, monitor["why"]))
    elif monitor and monitor["status"] != "answered":
        found.append(Flag(f"monitor {monitor['status']}", False, "the monitor model gave no verdict; the score stands"))
    if row.get("audit_flags"):
        found.append(Flag(f"{len(row['audit_flags'])} audit flag(s)", False, "; ".join(row["audit_flags"])))
    return found + review_flags(row)


def review_flags(row: dict[str, Any]) -> list[Flag]:
    """The row's first review flags as `review <marker> <file>:<line>` (the added line as detail), then how many
    more there are."""
    shown = [flag for flag in (row.get("review_flags") or []) if isinstance(flag, dict)][:REVIEW_FLAGS_SHOWN]
    found = []
    for flag in shown:
        where = flag.get("file", "") + (f":{flag['line']}" if flag.get("line") is not None else "")
        found.append(Flag(f"review {flag.get('marker', '')} {where}", False,
                          _severity(flag) + str(flag.get("text") or "")))
    more = (row.get("review_flag_count") or 0) - len(shown)
    if more > 0:
        found.append(Flag(f"review: {more} more", False, "listed in report.md and result.json"))
    return found


def _severity(flag: dict[str, Any]) -> str:
    """`high severity: ` before a high-severity flag's line, so a reader sees which flags hold a result for review
    (the row's `needs review` flag says that it is held)."""
    return "high severity: " if flag.get("severity") == "high" else ""
