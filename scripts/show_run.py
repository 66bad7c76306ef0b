"""One timeline page per scenario of an evaluated run (docs/pages.md, "timeline.html").

    python scripts/show_run.py RUN_FOLDER [--scenario ID] [--agents-run AGENTS_RUN_FOLDER ...]

Writes `timeline.html` into each prediction's folder of RUN_FOLDER (an evaluate.py run folder) and prints each
page's path, one per line; nothing is opened. evaluate.py writes the same pages at the end of a run; this redraws
them, for a run made before timelines or with trajectories found elsewhere.

--scenario picks one: a scenario id of the agent runner (`asyncodebench-demo:minicache/async_manager`), a
`task/protocol` pair, or a prediction folder's name. Trajectories are looked up relative to the predictions file
the run evaluated (where run_agents.py writes them); --agents-run names agents' run folders to look in as well,
for a predictions file copied or concatenated away from its run folder.

Exit codes: 0 written; 2 bad arguments (no readable report.json in RUN_FOLDER, no scenario of that name, an agents'
run folder that is not a folder).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from asyncodebench import cli


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="an evaluate.py run folder (holding report.json)")
    parser.add_argument("--scenario", default=None, help="only this scenario (id, task/protocol or folder name)")
    parser.add_argument("--agents-run", type=Path, action="append", default=[],
                        help="an agents' run folder (run_agents.py's) to find trajectories in; may be repeated")
    args = parser.parse_args(argv)
    for folder in args.agents_run:
        if not folder.is_dir():
            parser.error(f"--agents-run {folder}: not a folder; give a run_agents.py run folder")
    return args


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Imported after parsing, so --help loads no heavy dependency (tests/test_script_help.py).
    from asyncodebench.reports.timeline_files import write_run_timelines
    from asyncodebench.untrusted import terminal_text

    source = args.run / "report.json"
    try:
        report = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"{source}: cannot read the run's report ({exc}); give an "
                                               "evaluate.py run folder") from exc
    written = write_run_timelines(args.run, report, args.agents_run, args.scenario)
    if not written:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, terminal_text(
            f"no prediction of {args.run} matches --scenario {args.scenario}" if args.scenario else
            f"no prediction folder in {args.run}"))
    for page in written:
        print(terminal_text(str(page)))
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
