"""Claims that run: each behavioural claim of a task's statement or contract summaries, checked by executing it.

A task's audit record (data/tasks/<name>.audit.yaml) gives each claim either `checks` (small programs with the
output they must print, each run at the `reference` state, the base's parent restricted to the writable paths, or at
`base`, with the overlays, as agents get it) or `not_executable` (why it cannot be run: an ownership or intent
claim, for example). A record whose task has no image here says so once, in `checks_by_reading`.

The checks run in the task's image through the harness's own preparation (`Workbench.prepared`), as the sandbox
user with no network, each in a process of its own (`harness/incontainer/claims.py`). What ran is recorded in
`data/claim_checks.json` with a digest of the checks, so a check edited later without being run again shows.

A check that passes for the right rule proves little when it would pass for a plausible wrong rule too. A claim may
therefore record a `wrong_variant` beside it: the wrong rule in words and a prelude that puts that rule in place of
the reference's code (a monkeypatch, say). Each of the claim's checks runs a second time with the prelude before it;
the variant is caught when at least one of them then fails, and the record lists the variants no check caught.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
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
class Variant:
    """A plausible wrong rule recorded beside a claim: its checks must not all pass with `prelude` run first."""

    claim_id: str
    rule: str
    prelude: str

    def applied_to(self, check: Check) -> Check:
        """`check` with the wrong rule put in place first (same key: results say which run it was)."""
        return Check(check.claim_id, check.index, check.at, self.prelude + "\n" + check.code, check.expect)


@dataclass(frozen=True)
class ClaimSet:
    """A record's claims as the runner sees them."""

    task_id: str
    claims: int
    checks: tuple[Check, ...]
    executable: frozenset[str]  # claim ids with checks
    not_executable: dict[str, str]  # claim id -> why
    by_reading: str | None  # the record's reason, when nothing of it runs here
    variants: tuple[Variant, ...] = ()
    verdicts: dict[str, str] = field(default_factory=dict)  # claim id -> verified, corrected, unverifiable

    @property
    def digest(self) -> str:
        """sha256 over every check (claim, place, code, expected output) and every wrong variant: what a recorded
        run covered."""
        items: list[Any] = [[c.key, c.at, c.code, c.expect] for c in self.checks]
        if self.variants:  # a record without variants keeps the digest it had before variants existed
            items.append([[v.claim_id, v.rule, v.prelude] for v in self.variants])
        return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()

    def claim_digest(self, claim_id: str) -> str:
        """sha256 over one claim's checks and wrong variant: what a rerun of that claim alone covered."""
        items: list[Any] = [[c.key, c.at, c.code, c.expect] for c in self.checks if c.claim_id == claim_id]
        items += [[v.rule, v.prelude] for v in self.variants if v.claim_id == claim_id]
        return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()

    def variant_checks(self, checks: tuple[Check, ...]) -> tuple[Check, ...]:
        """Each of `checks` whose claim has a wrong variant, with the variant's prelude put first."""
        by_claim = {v.claim_id: v for v in self.variants}
        return tuple(by_claim[c.claim_id].applied_to(c) for c in checks if c.claim_id in by_claim)


def claim_set(record: dict[str, Any]) -> ClaimSet:
    """The checks of an audit record (already valid against schemas/audit_record.schema.json)."""
    checks, executable, not_executable, variants = [], set(), {}, []
    for claim in record["claims"]:
        for i, check in enumerate(claim.get("checks") or []):
            checks.append(Check(claim["id"], i, check["at"], check["code"], str(check["expect"])))
            executable.add(claim["id"])
        if "not_executable" in claim:
            not_executable[claim["id"]] = claim["not_executable"]
        if "wrong_variant" in claim:
            variants.append(Variant(claim["id"], claim["wrong_variant"]["rule"], claim["wrong_variant"]["prelude"]))
    return ClaimSet(record["task_id"], len(record["claims"]), tuple(checks), frozenset(executable), not_executable,
                    record.get("checks_by_reading"), tuple(variants),
                    {c["id"]: c["verdict"] for c in record["claims"]})


@dataclass(frozen=True)
class CheckResult:
    """What one check did."""

    check: Check
    outcome: str  # passed, failed, timed_out, not_run (its state could not be prepared)
    exit_code: int | None
    stdout: str
    stderr: str
    wrong_variant: bool = False  # the check ran with its claim's wrong variant in place (passing = not caught)


def run_checks(bench: Workbench, checks: tuple[Check, ...], patches: dict[str, bytes],
               progress: Callable[[str], None] = lambda _: None,
               variants: tuple[Check, ...] = ()) -> list[CheckResult]:
    """Every check, in one prepared container per state (`patches`: the patch making each state, overlays apart);
    `variants` (from `ClaimSet.variant_checks`) run in the same container, after the checks."""
    results: list[CheckResult] = []
    for state in STATES:
        mine = tuple(c for c in checks if c.at == state)
        wrong = tuple(c for c in variants if c.at == state)
        if not mine and not wrong:
            continue
        progress(f"{len(mine)} checks and {len(wrong)} wrong-variant runs at the {state} state")
        ran = _run_state(bench, mine + wrong, patches[state])
        results += ran[:len(mine)]
        results += [CheckResult(r.check, r.outcome, r.exit_code, r.stdout, r.stderr, True) for r in ran[len(mine):]]
    return results


def _run_state(bench: Workbench, checks: tuple[Check, ...], patch: bytes) -> list[CheckResult]:
    with bench.prepared(patch) as (box, preparation):
        if not preparation.usable:
            why = f"the state could not be prepared: {preparation.patch_status}"
            return [CheckResult(c, "not_run", None, "", why) for c in checks]
        config = {"sandbox_uid": SANDBOX_UID, "sandbox_gid": SANDBOX_GID, "home": HOME_DIR,
                  "workdir": bench.spec.workdir, "pythonpath": box.image_env.get("PYTHONPATH", ""),
                  "seconds": CHECK_SECONDS,
                  "checks": [{"key": f"{i}:{c.key}", "code": c.code, "expect": c.expect} for i, c in enumerate(checks)]}
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
    got = [by_key[f"{i}:{c.key}"] for i, c in enumerate(checks)]  # numbered: a variant run shares its check's key
    return [CheckResult(c, r["outcome"], r["exit_code"], r["stdout"], r["stderr"]) for c, r in zip(checks, got)]


def summary(claims: ClaimSet, results: list[CheckResult] | None, image: str | None = None,
            ran_on: str | None = None) -> dict[str, Any]:
    """The task's entry in the record file: counts, the digest and the image the checks ran in."""
    entry: dict[str, Any] = {
        "claims": claims.claims, "executable": len(claims.executable), "checks": len(claims.checks),
        "not_executable": len(claims.not_executable), "digest": claims.digest}
    if claims.by_reading:
        entry["checked_by_reading"] = claims.by_reading
    if results is not None:
        right = [r for r in results if not r.wrong_variant]
        failing = sorted({r.check.claim_id for r in right if r.outcome != "passed"})
        ran = {r.check.claim_id for r in right}
        entry.update(passing_claims=len(ran - set(failing)), failing_claims=failing,
                     checks_passed=sum(r.outcome == "passed" for r in right), image=image, ran_on=ran_on)
        if claims.variants:
            entry.update(wrong_variants=len(claims.variants), wrong_variants_missed=missed_variants(results))
        entry["claim_digests"] = {claim: claims.claim_digest(claim) for claim in sorted(claims.executable)}
    return entry


def rerun(claims: ClaimSet, results: list[CheckResult], image: str, ran_on: str, overlays: str) -> dict[str, Any]:
    """The record of a rerun of some claims (`--claims`), kept beside the task's full run: which checks ran
    (per-claim digests), what failed, which wrong variants no check caught, where and with which overlays."""
    ran = sorted({r.check.claim_id for r in results})
    return {"claim_digests": {claim: claims.claim_digest(claim) for claim in ran},
            "failing_claims": sorted({r.check.claim_id for r in results if not r.wrong_variant
                                      and r.outcome != "passed"}),
            "wrong_variants_missed": missed_variants(results), "image": image, "ran_on": ran_on,
            "overlays": overlays}


def with_rerun(entry: dict[str, Any], claims: ClaimSet, rerun_record: dict[str, Any]) -> dict[str, Any]:
    """The task's entry with a rerun added: counts and digest follow the checks as they are now."""
    updated = {**entry, "reruns": [*entry.get("reruns", []), rerun_record]}
    latest = latest_runs(updated)
    failing = sorted(claim for claim, run in latest.items() if claim in run.get("failing_claims", []))
    updated.update(claims=claims.claims, executable=len(claims.executable), checks=len(claims.checks),
                   not_executable=len(claims.not_executable), digest=claims.digest,
                   passing_claims=sum(c in latest and c not in failing for c in claims.executable),
                   failing_claims=failing)
    if claims.variants:
        updated.update(wrong_variants=len(claims.variants),
                       wrong_variants_missed=sorted(c for c, run in latest.items()
                                                    if c in run.get("wrong_variants_missed", [])))
    updated.pop("checks_passed", None)  # a count of the full run only; a rerun changes which checks there are
    return updated


def latest_runs(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """For each claim of a recorded entry, the run (the full one or a later rerun) that ran it last."""
    latest = {claim: entry for claim in entry.get("claim_digests", {})}
    for run in entry.get("reruns", []):
        latest.update({claim: run for claim in run["claim_digests"]})
    return latest


def stale_claims(claims: ClaimSet, entry: dict[str, Any]) -> list[str]:
    """Executable claims whose checks (or wrong variant) differ from those of the run that recorded them last."""
    latest = latest_runs(entry)
    return sorted(c for c in claims.executable
                  if c not in latest or latest[c]["claim_digests"][c] != claims.claim_digest(c))


def missed_variants(results: list[CheckResult]) -> list[str]:
    """Claims whose wrong variant ran and passed every one of the claim's checks: checks that cannot fail."""
    runs: dict[str, list[str]] = {}
    for r in results:
        if r.wrong_variant:
            runs.setdefault(r.check.claim_id, []).append(r.outcome)
    return sorted(claim for claim, outcomes in runs.items() if all(o == "passed" for o in outcomes))


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
