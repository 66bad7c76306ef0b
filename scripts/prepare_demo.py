"""Build the embedded demo tasks' images, push them to the local registry, and write their dataset folder.

    python scripts/prepare_demo.py build/demo-dataset

The folder holds the release schemas' rows of both demo tasks, `data/demo/task.yaml` (minicache) and
`data/demo-native/task.yaml` (vecstats, with native code), each pinned to the digest of the image just built for
it, so the evaluation runs the same code path as for the official images: `image@sha256:...` from a registry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROTOCOLS = Path(__file__).resolve().parent.parent / "data" / "protocols.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="folder to write the demo dataset into")
    args = parser.parse_args(argv)
    # After parsing, so --help loads none of them (`datasets` alone takes a second).
    import datasets

    from asyncodebench.dataset.build import build_task_rows
    from asyncodebench.dataset.export import write_rows
    from asyncodebench.dataset.sources import merge_rows
    from asyncodebench.dataset.validation import validate_rows
    from asyncodebench.images.demo import DEMO_TASKS, build
    from asyncodebench.images.registry import registry_port_from_env

    datasets.disable_progress_bars()  # its "Creating parquet" bars are noise in the demo's output
    port = registry_port_from_env()
    parts = []
    for task in DEMO_TASKS.values():  # one after the other: image builds are heavy
        image = build(port, task=task)
        parts.append(build_task_rows(task.task_yaml, PROTOCOLS, digest=image.digest))
        print(f"demo image {image.pinned_ref}", file=sys.stderr)
    rows = merge_rows(parts)
    validate_rows(rows)
    write_rows(rows, args.out_dir)
    print(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
