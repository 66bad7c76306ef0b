#!/usr/bin/env python3
r"""Rebuild every task image that has a recipe, validate each, and write the fidelity table.

    python scripts/fidelity_table.py --base local --dataset . \
        [--repo-pattern '/srv/mirrors/{name}.git'] [--tasks asyncodebench:cachetools ...] [--repeat 3]

For each task: a cold build (`build_task_image.py --no-cache`), a warm build (same recipe, Docker's cache), a
second cold build whose files must equal the first's, then `validate_task_image.py --repeat N` on the rebuilt image
(overlays applied when --overlays-dir is given, otherwise the bare base revision). Writes <out>/fidelity.json and
<out>/fidelity.md (docs/images.md's table) and prints the Markdown. --repo-pattern says where each repository is
({name} is the task's name); the default is the row's repository_url. The scripts it runs are the user's commands, with
their output kept in <out>/logs/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from asyncodebench.images import recipes

SCRIPTS = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="*", default=None, help="task ids (default: every task with a recipe)")
    parser.add_argument("--base", default=None, help="passed to build_task_image.py (`local` offline)")
    parser.add_argument("--dataset", default=None, help="passed to validate_task_image.py")
    parser.add_argument("--repo-pattern", default=None, help="where each repository is, {name} = task name")
    parser.add_argument("--overlays-dir", type=Path, default=None, help="upstream checkout with the overlays")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("build/fidelity"))
    return parser.parse_args(argv)


def run(cmd: list[str], log: Path) -> tuple[int, str, float]:
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.write_text(f"$ {' '.join(cmd)}\n{result.stderr}\n{result.stdout}")
    return result.returncode, result.stdout.strip(), time.monotonic() - started


def measure(task_id: str, args: argparse.Namespace) -> dict:
    name = task_id.split(":", 1)[1]
    logs = args.out / "logs"
    image_map = args.out / "rebuilt-images.json"
    build = [sys.executable, str(SCRIPTS / "build_task_image.py"), task_id, "--map", str(image_map)]
    if args.repo_pattern:
        build += ["--repo", args.repo_pattern.format(name=name)]
    if args.base:
        build += ["--base", args.base]
    row: dict = {"task_id": task_id}
    code, _, row["cold_build_seconds"] = run([*build, "--no-cache"], logs / f"{name}.build-cold.log")
    if code != 0:
        return {**row, "error": f"cold build failed (exit {code}); see {logs / f'{name}.build-cold.log'}"}
    first_content = json.loads(image_map.read_text())["images"][task_id]["content_sha256"]
    code, _, row["warm_build_seconds"] = run(build, logs / f"{name}.build-warm.log")
    # A second build from nothing: the same recipe must give the same files (times differ, and so the digest).
    code, _, _ = run([*build, "--no-cache"], logs / f"{name}.build-cold-again.log")
    entry = json.loads(image_map.read_text())["images"][task_id]
    row["same_content_when_rebuilt"] = code == 0 and entry["content_sha256"] == first_content
    row.update(pinned_ref=entry["pinned_ref"], python_version=entry["python_version"],
               content_sha256=entry["content_sha256"])
    size = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", entry["pinned_ref"]],
                          capture_output=True, text=True, check=False).stdout.strip()
    row["size_bytes"] = int(size) if size.isdigit() else None
    validate = [sys.executable, str(SCRIPTS / "validate_task_image.py"), task_id, "--images", str(image_map),
                "--repeat", str(args.repeat), "--out", str(args.out / "validation")]
    if args.repo_pattern:
        validate += ["--repo", args.repo_pattern.format(name=name)]
    if args.dataset:
        validate += ["--dataset", args.dataset]
    validate += ["--overlays-dir", str(args.overlays_dir)] if args.overlays_dir else ["--no-overlays"]
    code, _, row["validation_seconds"] = run(validate, logs / f"{name}.validate.log")
    record_path = args.out / "validation" / f"{name}.json"
    if code not in (0, 1) or not record_path.is_file():
        return {**row, "error": f"validation failed (exit {code}); see {logs / f'{name}.validate.log'}"}
    row["validation"] = json.loads(record_path.read_text())
    if row["validation"]["states"]["reference"]["matches_recorded"] is False:
        # Is it the image, or does the complete code reach outside the writable paths? Restore every file once.
        code, _, _ = run([*validate, "--reference-scope", "all", "--repeat", "1"], logs / f"{name}.validate-all.log")
        every = args.out / "validation" / f"{name}.all-files.json"
        row["reference_every_file"] = json.loads(every.read_text())["states"]["reference"] if every.is_file() else None
    return row


def _counts(counts: list) -> str:
    shown = sorted({"/".join(str(c[k]) for k in ("collected", "passed", "failed", "errors", "skipped"))
                    if c else "no report" for c in counts})
    return ", ".join(shown)


def table(rows: list[dict]) -> str:
    lines = ["| task | Python | base: measured / recorded | reference: measured / recorded | groups discriminating "
             "| flaky tests / selectors | cold / warm build, validation | size | same files when rebuilt |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['task_id']} | | {row['error']} | | | | | | |")
            continue
        v = row["validation"]
        cells = []
        for state in ("base", "reference"):
            s = v["states"][state]
            recorded = ", ".join("/".join(str(c[k]) for k in ("collected", "passed", "failed", "errors", "skipped"))
                                 for c in s["recorded"]) or "none"
            mark = {True: "", False: " **≠**", None: ""}[s["matches_recorded"]]
            cells.append(f"{_counts(s['counts'])} / {recorded}{mark}")
        every = row.get("reference_every_file")
        if every:
            cells[1] += f"; every file: {_counts(every['counts'])}{'' if every['matches_recorded'] else ' **≠**'}"
        groups = [g for p in v["dependency_points"] for g in p["groups"].values()]
        flaky = sum(len(v["states"][s]["flaky_tests"]) for s in ("base", "reference"))
        flaky_sel = sum(len(v["states"][s]["flaky_selectors"]) for s in ("base", "reference"))
        lines.append(
            f"| {row['task_id']} | {row['python_version']} | {cells[0]} | {cells[1]} | "
            f"{sum(g['discriminates'] for g in groups)}/{len(groups)} | {flaky} / {flaky_sel} | "
            f"{row['cold_build_seconds']:.0f} s / {row['warm_build_seconds']:.0f} s, "
            f"{row['validation_seconds']:.0f} s | "
            f"{(row['size_bytes'] or 0) / 1e6:.0f} MB | "
            f"{'yes' if row.get('same_content_when_rebuilt') else '**no**'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    (args.out / "logs").mkdir(parents=True, exist_ok=True)
    rows = []
    tasks = args.tasks or recipes.all_task_ids()
    for i, task_id in enumerate(tasks, 1):
        print(f"[{i}/{len(tasks)}] {task_id}", file=sys.stderr, flush=True)
        rows.append(measure(task_id, args))
        (args.out / "fidelity.json").write_text(json.dumps(rows, indent=2) + "\n")  # kept as it grows
    text = table(rows)
    (args.out / "fidelity.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
