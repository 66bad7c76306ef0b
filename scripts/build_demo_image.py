#!/usr/bin/env python3
"""Build a demo task's image, push it to the local registry and print its pinned reference.

    python scripts/build_demo_image.py [--task minicache|vecstats] [--port 5000] [--write-digest]

minicache (data/demo) is the default; vecstats (data/demo-native) is the native demo, whose image also holds its
build tree configured and built at base. The digest is only written into the task's task.yaml with --write-digest,
so that building the image (as tests and CI do) never edits the dataset sources behind the user's back.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    from asyncodebench.images.demo import DEMO_TASKS, PROJECT_ROOT, build, write_digest
    from asyncodebench.images.registry import REGISTRY_PORT_ENV, registry_port_from_env
    from asyncodebench.images.toolkit import ImageBuildError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(DEMO_TASKS), default="minicache",
                        help="which demo task's image to build (default: minicache)")
    parser.add_argument("--port", type=int, default=None,
                        help=f"registry port on 127.0.0.1 (default: ${REGISTRY_PORT_ENV} or 5000)")
    parser.add_argument("--write-digest", action="store_true",
                        help="write the pushed digest into the task's task.yaml (data/demo/task.yaml for minicache)")
    args = parser.parse_args(argv)
    task = DEMO_TASKS[args.task]
    try:
        port = args.port if args.port is not None else registry_port_from_env()
        started = time.monotonic()
        built = build(port, task=task)
        elapsed = time.monotonic() - started
        print(f"base_revision {built.base_revision}", file=sys.stderr)
        print(f"image id      {built.image_id}", file=sys.stderr)
        print(f"built in      {elapsed:.1f} s", file=sys.stderr)
        if args.write_digest:
            changed = write_digest(built.digest, task.task_yaml)
            shown = task.task_yaml.relative_to(PROJECT_ROOT)
            print(f"{shown}: {'updated' if changed else 'already pinned'}", file=sys.stderr)
    except ImageBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(built.pinned_ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
