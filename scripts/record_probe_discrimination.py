#!/usr/bin/env python3
"""Copy measured probe discrimination from image validations into the tasks' audit records.

    python scripts/record_probe_discrimination.py build/fidelity/validation/*.json

Each validation (`scripts/validate_task_image.py` output) says, per dependency point and probe group, whether the
group passes at base and at reference. This writes that into `data/tasks/<name>.audit.yaml` under
`probe_discrimination` (with the command and image it came from) and prints, per point, what an `audit_note`
should say: groups that pass at base (they cannot show when the contract was met), selectors that pass at base,
and groups that do not pass at reference. The notes themselves are written by a reviewer into the task's `.yaml`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

TASKS = Path(__file__).resolve().parent.parent / "data" / "tasks"


def block(validation: dict) -> dict:
    points = {p["dependency_id"]: {group: {k: g[k] for k in ("passes_at_base", "passes_at_reference", "discriminates")}
                                   for group, g in p["groups"].items()}
              for p in validation["dependency_points"]}
    listed, applied = validation["overlays_listed"], validation["overlays_applied"]
    overlays = ("none listed" if not listed else f"all {listed} applied" if applied == listed
                else f"{listed} listed, not applied: base results are of the bare revision")
    return {
        "command": f"python scripts/validate_task_image.py {validation['task_id']} --images MAP --repeat "
                   f"{validation['repeat']}" + (" --no-overlays" if listed and not applied else
                                                " --overlays-dir CHECKOUT" if applied else ""),
        "image": validation["image"],
        "provenance": validation["provenance"],
        "overlays": overlays,
        "points": points,
    }


def findings(validation: dict) -> list[str]:
    lines = []
    for point in validation["dependency_points"]:
        for group, g in point["groups"].items():
            if g["passes_at_base"] is True:
                lines.append(f"{point['dependency_id']}: the {group} group passes at base")
            elif g.get("selectors_passing_at_base"):
                lines.append(f"{point['dependency_id']}: {group} selectors passing at base: "
                             f"{', '.join(g['selectors_passing_at_base'])}")
            if g["passes_at_reference"] is not True:
                lines.append(f"{point['dependency_id']}: the {group} group passes at reference: "
                             f"{g['passes_at_reference']}")
    return lines


def record(validation: dict) -> Path:
    """Write the block into the audit record as text, so the hand-written part keeps its layout."""
    path = TASKS / f"{validation['task_id'].split(':', 1)[1]}.audit.yaml"
    text = path.read_text(encoding="utf-8")
    marker = "\nprobe_discrimination:"
    if marker in text:
        text = text[:text.index(marker)] + "\n"
    dumped = yaml.safe_dump({"probe_discrimination": block(validation)}, sort_keys=False, width=120)
    path.write_text(text.rstrip("\n") + "\n" + dumped, encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("validations", nargs="+", type=Path, help="validate_task_image.py JSON outputs")
    for file in parser.parse_args(argv).validations:
        validation = json.loads(Path(file).read_text())
        if validation.get("reference_scope", "writable") != "writable":
            continue  # the every-file diagnostic run is not what agents can reach
        path = record(validation)
        print(f"{path.relative_to(TASKS.parent.parent)}:")
        for line in findings(validation) or ["every group fails at base and passes at reference"]:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
