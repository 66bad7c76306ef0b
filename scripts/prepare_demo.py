"""Build the embedded demo task's image, push it to the local registry, and write its dataset folder.

    python scripts/prepare_demo.py build/demo-dataset

The demo rows are the release schemas' rows of `data/demo/task.yaml`, pinned to the digest of the image just
built, so the evaluation runs the same code path as for the official images: `image@sha256:...` from a registry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from asyncodebench.dataset.build import build_task_rows
from asyncodebench.dataset.export import write_rows
from asyncodebench.images.demo import DEMO_TASK_YAML, build
from asyncodebench.images.registry import registry_port_from_env

PROTOCOLS = Path(__file__).resolve().parent.parent / "data" / "protocols.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path, help="folder to write the demo dataset into")
    args = parser.parse_args(argv)
    image = build(registry_port_from_env())
    rows = build_task_rows(DEMO_TASK_YAML, PROTOCOLS, digest=image.digest)
    write_rows(rows, args.out_dir)
    print(f"demo image {image.pinned_ref}", file=sys.stderr)
    print(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
