"""Check a task image against the release's recorded counts: base state, reference state, probes, flakiness.

The base state (overlays applied when they are given) is compared with the row's recorded initial counts; the
reference state with the recorded completed counts. For Commit0 tasks the base commit's parent holds the original
upstream code, so the reference patch is derived here from the repository (`git diff base parent`, from the base
with its overlays applied when there are any: agents' patches start there too), restricted to the task's writable
paths; it is never stored. Every probe selector runs in both states, and each dependency
point's groups are judged: a group discriminates when it fails at base and passes at reference. Each state runs
`repeat` times, each time in fresh containers (the harness's own procedure), and every test or selector whose
outcome differs between the runs is listed with how often each outcome came.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from asyncodebench.harness.checks import audit_flags, examine_evidence
from asyncodebench.harness.evaluation import Evidence, Settings, evaluate_patch
from asyncodebench.harness.probes import selector_results
from asyncodebench.harness.spec import COUNT_KEYS, TaskSpec
from asyncodebench.images.task_build import GIT_ENV, BuildError, fetch, git
from asyncodebench.scoring.grading import SelectorResult, group_state, normalize_report

STATES = ("base", "reference")
GROUPS = ("upstream", "downstream", "integrated")


@dataclass(frozen=True)
class StateRun:
    """One evaluation of one state: its counts, each test's outcome and each probe selector's status."""

    counts: dict[str, int] | None
    tests: dict[str, str]
    selectors: dict[str, str]
    seconds: float
    tampering: tuple[str, ...] = ()  # contradictions in the evidence (none expected from honest code)
    audit: tuple[str, ...] = ()  # what the runtime audit flagged (none expected from honest code)


def reference_patch(repo: str, cache: Path, base: str, reference: str | None, paths: tuple[str, ...],
                    overlays: dict[str, bytes] | None = None) -> tuple[str, bytes]:
    """(reference revision, the diff to it restricted to `paths`) from the task's repository: from the base, or from
    the base with `overlays` applied in order (the evaluation applies them, then the patch).

    Raises:
        BuildError: the repository or a revision cannot be had; a base without a parent needs `reference`.
    """
    git_dir = fetch(repo, base, cache, depth=2)  # the base and its parent
    rev = f"{base}^"
    if reference:
        fetch(repo, reference, cache)
        # A commit id the cache now holds names itself; a branch or tag name is what the fetch brought (FETCH_HEAD).
        known = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet",
                                f"{reference}^{{commit}}"], capture_output=True, env={**os.environ, **GIT_ENV},
                               check=False).returncode == 0
        rev = reference if known else "FETCH_HEAD"
    try:
        resolved = git("--git-dir", str(git_dir), "rev-parse", "--verify", f"{rev}^{{commit}}")
    except BuildError as exc:
        raise BuildError(f"cannot resolve the reference revision {rev} in {repo}; give --reference-revision "
                         f"(the commit holding the complete code): {exc}") from exc
    start = _overlaid_tree(git_dir, base, overlays) if overlays else base
    # Bytes as git wrote them: a binary hunk ends with a blank line, and files need not be UTF-8.
    done = subprocess.run(["git", "--git-dir", str(git_dir), "diff", "--binary", "--no-color", "--no-ext-diff", start,
                           resolved, *(("--", *paths) if paths else ())],
                          capture_output=True, env={**os.environ, **GIT_ENV}, check=False)
    if done.returncode != 0:
        raise BuildError(f"git diff {base} {resolved} failed: {done.stderr.decode(errors='replace').strip()}")
    return resolved, done.stdout


def _overlaid_tree(git_dir: Path, base: str, overlays: dict[str, bytes]) -> str:
    """The tree of `base` with the overlays applied, built in a scratch index (the repository has no work tree)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, **GIT_ENV, "GIT_INDEX_FILE": f"{scratch}/index"}
        steps = [["read-tree", base]]
        for number, patch in enumerate(overlays.values()):
            (Path(scratch) / f"{number}.patch").write_bytes(patch)
            steps.append(["apply", "--cached", "--whitespace=nowarn", f"{scratch}/{number}.patch"])
        for step in [*steps, ["write-tree"]]:
            done = subprocess.run(["git", "--git-dir", str(git_dir), *step], capture_output=True, env=env, check=False)
            if done.returncode != 0:
                raise BuildError(f"git {step[0]} failed while applying the overlays to {base[:12]}: "
                                 f"{done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode().strip()


def without_overlays(spec: TaskSpec) -> TaskSpec:
    """The task on its bare base revision (for comparing with counts recorded before any overlay)."""
    return dataclasses.replace(spec, overlays=())


def state_run(spec: TaskSpec, evidence: Evidence) -> StateRun:
    """The state's evidence as grading reads it (sentinels out), with what the tampering checks found: on honest
    code, a false positive of theirs."""
    evidence, tampering = examine_evidence(evidence)
    audit = tuple(f"{a['process']}: {a['event']}" for a in audit_flags(evidence))
    report = evidence.report
    normalized = normalize_report(report, evidence.exit_code, evidence.output)
    counts = None if normalized.synthetic_summary else {
        "collected": normalized.total, "passed": normalized.passed, "failed": normalized.failed,
        "errors": normalized.errors, "skipped": normalized.skipped}
    tests = {t["nodeid"]: t.get("outcome", "?") for t in (report or {}).get("tests") or [] if "nodeid" in t}
    selectors = {s: r.status for s, r in selector_results(evidence.probes, spec.selectors).items()}
    return StateRun(counts, tests, selectors, evidence.evaluator_seconds,
                    tuple(f"{t['process']}: {t['reason']}" for t in tampering), audit)


def flaky(runs: list[StateRun], field: str) -> dict[str, dict[str, int]]:
    """Every test (or selector) present in every run whose outcome differs between runs, with how many runs gave
    each outcome."""
    found = {}
    for name in sorted(set.intersection(*(set(getattr(r, field)) for r in runs))):
        outcomes = Counter(getattr(r, field)[name] for r in runs)
        if len(outcomes) > 1:
            found[name] = dict(sorted(outcomes.items()))
    return found


def varying_ids(runs: list[StateRun]) -> list[str]:
    """Test ids that only some runs have: ids made from something that changes, such as the time in a parameter.
    Not flakiness of outcome, but results keyed by these ids cannot be compared across runs."""
    every = [set(r.tests) for r in runs]
    return sorted(set[str]().union(*every) - (every[0].intersection(*every[1:]) if every else set()))


def _matches(counts: list[dict[str, int] | None], recorded: list[dict[str, int]]) -> bool | None:
    """Whether every run's counts equal one recorded snapshot. A run without a report (collection failed before
    any test) matches a snapshot that recorded nothing at all, which is how the release records such a base."""
    if not recorded:
        return None
    nothing = dict.fromkeys(COUNT_KEYS, 0)
    return all(any(all((c or nothing)[k] == snap[k] for k in COUNT_KEYS) for snap in recorded) for c in counts)


def discrimination(spec: TaskSpec, base: list[StateRun], reference: list[StateRun]) -> list[dict[str, Any]]:
    """Per dependency point and group: passes at base? at reference? (in every run) and whether it discriminates."""
    points = []
    for point in spec.dependencies:
        groups = {}
        for group in GROUPS:
            selectors = tuple(getattr(point, f"{group}_probe_tests"))
            if not selectors:
                continue
            passed = {name: [group_state(selectors, _results(r.selectors)).passed for r in runs]
                      for name, runs in (("base", base), ("reference", reference))}
            always = [sel for sel in selectors if all(r.selectors.get(sel) == "passed" for r in base)]
            groups[group] = {"selectors": len(selectors), "selectors_passing_at_base": always,
                             "passes_at_base": _all_or_mixed(passed["base"]),
                             "passes_at_reference": _all_or_mixed(passed["reference"]),
                             "discriminates": not any(passed["base"]) and all(passed["reference"])}
        points.append({"dependency_id": point.dependency_id, "groups": groups})
    return points


def _results(statuses: dict[str, str]) -> dict[str, SelectorResult]:
    return {s: SelectorResult(s, st, st == "passed", ()) for s, st in statuses.items()}


def _all_or_mixed(values: list[bool]) -> bool | str:
    return values[0] if len(set(values)) == 1 else "mixed"


def validate(client: Any, spec: TaskSpec, reference: tuple[str, bytes], completed_counts: list[dict[str, int]],
             run_id: str, settings: Settings, overlays: dict[str, bytes], repeat: int,
             progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run both states `repeat` times and compare; returns the validation record (JSON-ready)."""
    started = time.monotonic()
    patches = {"base": b"", "reference": reference[1]}
    runs: dict[str, list[StateRun]] = {s: [] for s in STATES}
    for i in range(repeat):
        for state in STATES:
            progress(f"{state} run {i + 1}/{repeat}")
            runs[state].append(state_run(spec, evaluate_patch(client, spec, patches[state], run_id, settings,
                                                              overlays)))
    recorded = {"base": [dict(c) for c in spec.initial_counts], "reference": completed_counts}
    states = {}
    for state in STATES:
        states[state] = {
            "counts": [r.counts for r in runs[state]],
            "recorded": recorded[state],
            "matches_recorded": _matches([r.counts for r in runs[state]], recorded[state]),
            "flaky_tests": flaky(runs[state], "tests"),
            "varying_test_ids": varying_ids(runs[state]),
            "flaky_selectors": flaky(runs[state], "selectors"),
            "evaluator_seconds": [round(r.seconds, 2) for r in runs[state]],
            "selectors": runs[state][0].selectors,  # the first run's; changes between runs are listed above
            "tampering_flags": sorted({f for r in runs[state] for f in r.tampering}),
            "audit_flags": sorted({f for r in runs[state] for f in r.audit}),
        }
    # What keeps the reference state from the recorded completed counts, test by test (first run).
    states["reference"]["tests_not_passing"] = {n: o for n, o in runs["reference"][0].tests.items()
                                                if o not in ("passed", "skipped", "xfailed")}
    matched = all(states[s]["matches_recorded"] is True for s in STATES)
    return {
        "task_id": spec.task_id, "image": spec.pinned_ref, "provenance": spec.image_provenance,
        "base_revision": spec.base_revision, "reference_revision": reference[0],
        "reference_patch_bytes": len(reference[1]), "overlays_applied": len(overlays),
        "repeat": repeat, "states": states, "dependency_points": discrimination(spec, runs["base"], runs["reference"]),
        "counts_match": matched, "seconds": round(time.monotonic() - started, 1),
    }


def _fmt_counts(counts: dict[str, int] | None) -> str:
    if counts is None:
        return "no report"
    return "/".join(str(counts[k]) for k in COUNT_KEYS)


def markdown(record: dict[str, Any]) -> str:
    """The validation as Markdown: counts against the record, probe discrimination, flaky tests and selectors."""
    lines = [f"# Image validation: {record['task_id']}", "",
             f"Image `{record['image']}` ({record['provenance']}); base `{record['base_revision'][:12]}`, "
             f"reference `{record['reference_revision'][:12]}`; {record['repeat']} run(s) per state; "
             f"{record['overlays_applied']} of {record['overlays_listed']} overlay(s) applied; reference restores "
             f"{'every file' if record.get('reference_scope') == 'all' else 'the writable paths'}; "
             f"{record['seconds']} s.", "",
             "Counts are collected/passed/failed/errors/skipped.", "",
             "| state | measured (each run) | recorded | match |", "|---|---|---|---|"]
    for state in STATES:
        s = record["states"][state]
        measured = ", ".join(sorted({_fmt_counts(c) for c in s["counts"]}))
        recorded = ", ".join(_fmt_counts(c) for c in s["recorded"]) or "none recorded"
        verdict = {True: "yes", False: "**no**", None: "nothing to compare"}[s["matches_recorded"]]
        lines.append(f"| {state} | {measured} | {recorded} | {verdict} |")
    lines += ["", "| dependency point | group | selectors (passing at base) | group passes at base | "
                  "group passes at reference | discriminates |", "|---|---|---|---|---|---|"]
    for point in record["dependency_points"]:
        for group, g in point["groups"].items():
            lines.append(f"| {point['dependency_id']} | {group} | {g['selectors']} "
                         f"({len(g['selectors_passing_at_base'])}) | {g['passes_at_base']} | "
                         f"{g['passes_at_reference']} | {'yes' if g['discriminates'] else '**no**'} |")
    for state in STATES:
        for kind in ("flaky_tests", "flaky_selectors"):
            found = record["states"][state][kind]
            if found:
                lines += ["", f"{kind.replace('_', ' ').capitalize()} in the {state} state:", ""]
                repeat = record["repeat"]
                lines += [f"- `{name}`: " + ", ".join(f"{o} {n}/{repeat}" for o, n in outcomes.items())
                          for name, outcomes in found.items()]
    if not any(record["states"][s][k] for s in STATES for k in ("flaky_tests", "flaky_selectors")):
        lines += ["", f"No test or probe selector changed outcome between the {record['repeat']} runs."]
    for state in STATES:
        ids = record["states"][state]["varying_test_ids"]
        if ids:
            lines += ["", f"Test ids that only some runs of the {state} state have ({len(ids)}; made from something "
                          f"that changes, such as the time): " + ", ".join(f"`{i}`" for i in ids[:6])
                      + (" ..." if len(ids) > 6 else "")]
    flags = [(state, kind, flag) for state in STATES for kind in ("tampering_flags", "audit_flags")
             for flag in record["states"][state].get(kind, [])]
    lines += ["", "Tampering checks and runtime audit on this honest code: "
              + ("no false positive." if not flags else f"{len(flags)} flag(s) (false positives):")]
    lines += [f"- {state}, {kind.split('_')[0]}: {flag}" for state, kind, flag in flags]
    lines += ["", f"Counts match the record: {'yes' if record['counts_match'] else 'no'}.", ""]
    return "\n".join(lines)
