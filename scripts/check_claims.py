#!/usr/bin/env python3
r"""Run the executable claim checks of tasks' audit records in their images, and record the outcome.

    python scripts/check_claims.py asyncodebench:wcwidth [more task ids | --all] --images build/rebuilt-images.json \
        [--repo-pattern '/srv/mirrors/{name}.git'] [--overlays-dir CHECKOUT] [--record]

Each claim of data/tasks/<name>.audit.yaml has `checks` (programs with the output they must print, each at the
`reference` state, the base's parent restricted to the task's writable paths, or at `base`, overlays applied) or a
`not_executable` reason. The checks of each state run in one prepared container of the task's image, as the sandbox
user with no network, each in a process of its own. Prints a table (claims, executable, passing, not executable) and
every failing check with what it printed; writes <out>/<name>.json. With --record, data/claim_checks.json takes each
task's counts, the checks' digests and the image (the README's table is made from it); with --claims as well, the
run is recorded as a rerun of those claims beside the task's full run.

A claim with a `wrong_variant` (a plausible wrong rule and a prelude that puts it in place) has its checks run a
second time with the prelude first; a variant that passes every check of its claim is reported as not caught, and
fails the run like a failing check. --without-overlays REASON reruns named claims of a task whose overlays cannot be
had here: reference-state checks only, on the whole reference commit (every file as upstream wrote it, where the
overlays would have bootstrapped the hollow files outside the writable paths); the record says so, with the reason.

Exit codes: 0 every check passed; 1 a check failed; 2 bad arguments; 3 infrastructure (dataset, daemon, image,
repository or overlays unavailable).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import signal
import sys
from pathlib import Path

import yaml

from asyncodebench import cli
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION
from asyncodebench.harness.evaluation import Workbench, new_run_id
from asyncodebench.harness.sandbox import SandboxUnavailableError, remove_run_containers, remove_run_volumes
from asyncodebench.images import claims

AUDIT_DIR = Path(__file__).resolve().parent.parent / "data" / "tasks"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_ids", nargs="*", help="tasks to check (or --all)")
    parser.add_argument("--all", action="store_true", help="every task with an audit record")
    parser.add_argument("--images", type=Path, default=None, metavar="MAP", help="image map naming the images")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    parser.add_argument("--audit-dir", type=Path, default=AUDIT_DIR, help="folder of <name>.audit.yaml")
    cli.add_reference_arguments(parser)
    parser.add_argument("--claims", nargs="*", default=None, metavar="ID", help="run only these claims' checks")
    parser.add_argument("--record", nargs="?", const=claims.RECORD_FILE, default=None, type=Path, metavar="FILE",
                        help="update the record file (default data/claim_checks.json) with each task's run")
    parser.add_argument("--out", type=Path, default=Path("build/claims"), help="folder for <name>.json")
    parser.add_argument("--without-overlays", default=None, metavar="REASON",
                        help="run without the task's overlays, on the whole reference commit (recorded with "
                             "REASON); only with --claims whose checks all run at the reference state")
    cli.add_limit_arguments(parser)
    args = parser.parse_args(argv)
    if args.all == bool(args.task_ids):
        parser.error("give task ids or --all (not both)")
    if args.without_overlays is not None and args.claims is None:
        parser.error("--without-overlays is for a rerun of named claims (give --claims)")
    return args


def audit_record(folder: Path, task_id: str) -> dict:
    path = folder / f"{task_id.split(':', 1)[1]}.audit.yaml"
    if not path.exists():
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"no audit record for {task_id} at {path}")
    return yaml.safe_load(path.read_text())


def check_task(task_id: str, args: argparse.Namespace) -> tuple[claims.ClaimSet, list[claims.CheckResult], str]:
    """Run one task's checks and wrong variants; returns its claims, the results and the image they ran in."""
    claim_set = claims.claim_set(audit_record(args.audit_dir, task_id))
    checks = claim_set.checks
    if args.claims is not None:
        unknown = set(args.claims) - claim_set.executable
        if unknown:
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"{task_id} has no checks for claims {sorted(unknown)}")
        checks = tuple(c for c in checks if c.claim_id in set(args.claims))
    row, spec = cli.task(args.dataset, args.revision, task_id, args.images)
    if not checks:
        return claim_set, [], spec.pinned_ref
    if args.without_overlays is not None:
        if any(c.at != "reference" for c in checks):
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, "--without-overlays runs reference-state checks only; the base "
                                                   "state is what agents get, overlays included")
        spec = dataclasses.replace(spec, overlays=())
    overlays = cli.task_overlays(args, spec)
    patches = {"base": b""}
    if any(c.at == "reference" for c in checks):
        # Without the overlays the files outside the writable paths stay hollow at base, and the reference code
        # does not import; the whole reference commit stands in for the state.
        patches["reference"] = cli.reference_patch(args, row, spec, overlays, whole=args.without_overlays is not None)
    run_id = f"claims-{new_run_id()}"
    client = cli.client_for_image(spec)
    try:
        bench = Workbench.open(client, spec, run_id, cli.settings(args, run_probes=False), overlays)
        results = claims.run_checks(bench, checks, patches,
                                    progress=lambda m: print(f"{task_id}: {m}", file=sys.stderr, flush=True),
                                    variants=claim_set.variant_checks(checks))
    except SandboxUnavailableError as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    finally:
        remove_run_containers(client, run_id)
        remove_run_volumes(client, run_id)
    return claim_set, results, spec.pinned_ref


def failure_text(result: claims.CheckResult) -> str:
    check = result.check
    return (f"- {check.key} at {check.at}: {result.outcome} (exit {result.exit_code})\n"
            f"  expected: {check.expect.strip()!r}\n  printed:  {result.stdout.strip()[-500:]!r}\n"
            + (f"  stderr:   {result.stderr.strip()[-800:]}\n" if result.stderr.strip() else ""))


def task_ids(args: argparse.Namespace) -> list[str]:
    if not args.all:
        return list(args.task_ids)
    return [yaml.safe_load(path.read_text())["task_id"] for path in sorted(args.audit_dir.glob("*.audit.yaml"))]


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(cli.EXIT_TERMINATED))
    entries = claims.load_record_file(args.record) if args.record else claims.load_record_file()
    ran: dict[str, dict] = {}
    failures: list[str] = []
    args.out.mkdir(parents=True, exist_ok=True)
    for task_id in task_ids(args):
        claim_set = claims.claim_set(audit_record(args.audit_dir, task_id))
        if claim_set.by_reading:  # no image of it runs here: recorded as read
            ran[task_id] = claims.summary(claim_set, None)
            continue
        claim_set, results, image = check_task(task_id, args)
        today = datetime.date.today().isoformat()
        if args.claims is None:
            ran[task_id] = claims.summary(claim_set, results, image, today)
        else:
            overlays = ("applied" if args.without_overlays is None
                        else f"not applied, the whole reference commit instead: {args.without_overlays}")
            ran[task_id] = claims.with_rerun(entries.get(task_id) or claims.summary(claim_set, None), claim_set,
                                             claims.rerun(claim_set, results, image, today, overlays))
        failures += [f"{task_id} {failure_text(r)}" for r in results if r.outcome != "passed" and not r.wrong_variant]
        failures += [f"{task_id} - wrong variant of {claim} not caught: every check passes with "
                     f"'{next(v.rule for v in claim_set.variants if v.claim_id == claim)}' in place\n"
                     for claim in claims.missed_variants(results)]
        (args.out / f"{task_id.split(':', 1)[1]}.json").write_text(json.dumps(
            {"task_id": task_id, "image": image, "summary": ran[task_id],
             "results": [{"claim": r.check.claim_id, "key": r.check.key, "at": r.check.at, "outcome": r.outcome,
                          "wrong_variant": r.wrong_variant, "exit_code": r.exit_code, "stdout": r.stdout,
                          "stderr": r.stderr} for r in results]},
            indent=2) + "\n")
    if args.record:
        claims.save_record_file({**entries, **ran}, args.record)
    print(claims.markdown_table(ran))
    if failures:
        print("Failing checks:\n" + "".join(failures))
    return cli.EXIT_PROBLEMS_FOUND if failures else cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
