"""Claims that run: each behavioural claim of a task's statement or contract summaries, checked by executing it.

A task's audit record (data/tasks/<name>.audit.yaml) gives each claim either `checks` (small programs with the
output they must print, each run at the `reference` state, the base's parent restricted to the writable paths, or at
`base`, with the overlays, as agents get it) or `not_executable` (why it cannot be run: an ownership or intent
claim, for example). A record whose task has no image here says so once, in `checks_by_reading`.

The checks run in the task's image through the harness's own preparation (`Workbench.prepared`), as the sandbox
user with no network, each in a process of its own (`harness/incontainer/claims.py`). What ran is recorded in
`data/claim_checks.json` with a digest of the checks, so a check edited later without being run again shows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from asyncodebench.harness.evaluation import Workbench
from asyncodebench.harness.sandbox import IO_DIR, OVERSIZED, SANDBOX_GID, SANDBOX_UID
from asyncodebench.harness.workspace import HOME_DIR, OUT_DIR, SCRIPTS_DIR

STATES = ("reference", "base")
CHECK_SECONDS = 60  # one check: imports and a few calls; a check that needs longer is a bad check
RESULT_CAP_BYTES = 16 * 1024 * 1024
RECORD_FILE = Path(__file__).resolve().parents[2] / "data" / "claim_checks.json"


@dataclass(frozen=True)
class Check:
    """One program of one claim: where it runs, what it is, what it must print."""

    claim_id: str
    index: int
    at: str  # `reference` or `base`
    code: str
    expect: str

    @property
    def key(self) -> str:
        """`<claim id>#<n>`, unique in the task."""
        return f"{self.claim_id}#{self.index}"


@dataclass(frozen=True)
class ClaimSet:
    """A record's claims as the runner sees them."""

    task_id: str
    claims: int
    checks: tuple[Check, ...]
    executable: frozenset[str]  # claim ids with checks
    not_executable: dict[str, str]  # claim id -> why
    by_reading: str | None  # the record's reason, when nothing of it runs here

    @property
    def digest(self) -> str:
        """sha256 over every check (claim, place, code, expected output): what a recorded run covered."""
        body = json.dumps([[c.key, c.at, c.code, c.expect] for c in self.checks], ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()


def claim_set(record: dict[str, Any]) -> ClaimSet:
    """The checks of an audit record (already valid against schemas/audit_record.schema.json)."""
    checks, executable, not_executable = [], set(), {}
    for claim in record["claims"]:
        for i, check in enumerate(claim.get("checks") or []):
            checks.append(Check(claim["id"], i, check["at"], check["code"], str(check["expect"])))
            executable.add(claim["id"])
        if "not_executable" in claim:
            not_executable[claim["id"]] = claim["not_executable"]
    return ClaimSet(record["task_id"], len(record["claims"]), tuple(checks), frozenset(executable), not_executable,
                    record.get("checks_by_reading"))


@dataclass(frozen=True)
class CheckResult:
    """What one check did."""

    check: Check
    outcome: str  # passed, failed, timed_out, not_run (its state could not be prepared)
    exit_code: int | None
    stdout: str
    stderr: str


def run_checks(bench: Workbench, checks: tuple[Check, ...], patches: dict[str, bytes],
               progress: Callable[[str], None] = lambda _: None) -> list[CheckResult]:
    """Every check, in one prepared container per state (`patches`: the patch making each state, overlays apart)."""
    results: list[CheckResult] = []
    for state in STATES:
        mine = tuple(c for c in checks if c.at == state)
        if not mine:
            continue
        progress(f"{len(mine)} checks at the {state} state")
        results += _run_state(bench, mine, patches[state])
    return results


def _run_state(bench: Workbench, checks: tuple[Check, ...], patch: bytes) -> list[CheckResult]:
    with bench.prepared(patch) as (box, preparation):
        if not preparation.usable:
            why = f"the state could not be prepared: {preparation.patch_status}"
            return [CheckResult(c, "not_run", None, "", why) for c in checks]
        config = {"sandbox_uid": SANDBOX_UID, "sandbox_gid": SANDBOX_GID, "home": HOME_DIR,
                  "workdir": bench.spec.workdir, "pythonpath": box.image_env.get("PYTHONPATH", ""),
                  "seconds": CHECK_SECONDS,
                  "checks": [{"key": c.key, "code": c.code, "expect": c.expect} for c in checks]}
        box.write_files({"claims.py": (SCRIPTS_DIR / "claims.py").read_bytes(),
                         "claims.json": json.dumps(config).encode()}, IO_DIR, mode=0o644)
        result_path = f"{OUT_DIR}/claims-result.json"
        done = box.exec([bench.spec.interpreter, "-I", f"{IO_DIR}/claims.py", f"{IO_DIR}/claims.json", result_path],
                        (CHECK_SECONDS + 5) * len(checks) + 60)
        raw = box.read_file(result_path, RESULT_CAP_BYTES)
    if raw is None or raw is OVERSIZED:
        tail = done.output.decode("utf-8", "replace")[-2000:]
        return [CheckResult(c, "not_run", None, "", f"the check runner wrote no result: {tail}") for c in checks]
    by_key = {r["key"]: r for r in json.loads(raw)}
    return [CheckResult(c, by_key[c.key]["outcome"], by_key[c.key]["exit_code"], by_key[c.key]["stdout"],
                        by_key[c.key]["stderr"]) for c in checks]


def summary(claims: ClaimSet, results: list[CheckResult] | None, image: str | None = None,
            ran_on: str | None = None) -> dict[str, Any]:
    """The task's entry in the record file: counts, the digest and the image the checks ran in."""
    entry: dict[str, Any] = {
        "claims": claims.claims, "executable": len(claims.executable), "checks": len(claims.checks),
        "not_executable": len(claims.not_executable), "digest": claims.digest}
    if claims.by_reading:
        entry["checked_by_reading"] = claims.by_reading
    if results is not None:
        failing = sorted({r.check.claim_id for r in results if r.outcome != "passed"})
        ran = {r.check.claim_id for r in results}
        entry.update(passing_claims=len(ran - set(failing)), failing_claims=failing,
                     checks_passed=sum(r.outcome == "passed" for r in results), image=image, ran_on=ran_on)
    return entry


def load_record_file(path: Path = RECORD_FILE) -> dict[str, Any]:
    """The recorded runs, by task id (empty when nothing was recorded yet)."""
    return json.loads(path.read_text())["tasks"] if path.exists() else {}


def save_record_file(entries: dict[str, Any], path: Path = RECORD_FILE) -> None:
    """Write the recorded runs, sorted by task id."""
    path.write_text(json.dumps({"schema_version": "1", "tasks": dict(sorted(entries.items()))}, indent=2,
                               ensure_ascii=False) + "\n")


def markdown_table(entries: dict[str, Any]) -> str:
    """The README's summary: per task, claims, executable, passing, not executable; a total row."""
    lines = ["| task | claims | executable | passing | not executable | checked by reading |",
             "|---|---|---|---|---|---|"]
    total = [0, 0, 0, 0, 0]
    for task_id, e in sorted(entries.items()):
        read = e["claims"] if e.get("checked_by_reading") else 0
        row = [e["claims"], e["executable"], e.get("passing_claims", 0), e["not_executable"], read]
        total = [a + b for a, b in zip(total, row)]
        lines.append(f"| {task_id.split(':', 1)[1]} | " + " | ".join(str(v) for v in row) + " |")
    lines.append("| **all** | " + " | ".join(f"**{v}**" for v in total) + " |")
    return "\n".join(lines) + "\n"
