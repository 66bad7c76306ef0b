#!/usr/bin/env python3
r"""Rebuild a task's image from public source, push it, and print its pinned reference (repo@sha256:...).

    python scripts/build_task_image.py asyncodebench:cachetools
    python scripts/build_task_image.py asyncodebench:cachetools --repo /path/to/cachetools.git --base local \
        --push 127.0.0.1:5000 --map build/rebuilt-images.json

The recipe is data/tasks/<name>.image.yaml with the shared data/tasks/Dockerfile. --repo defaults to the task's
repository URL; --base defaults to the official python:<version>-slim image of the recipe, and `--base local`
builds on a Debian base made here with mmdebstrap (Debian's Python 3.11; for machines without Docker Hub).
The pinned reference goes to stdout and, with its recipe digest, base digest, content digest and build date, into
the image map (--map), which scripts/evaluate.py, run_task.py, check_images.py and validate_task_image.py take
with --images. --no-cache rebuilds every step; the content digest of two builds of one recipe is equal (layer
times and so the registry digest differ). Exit codes: 0 built and pushed; 2 bad arguments or no recipe; 3 a
build step failed (the message says which).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from asyncodebench import cli
from asyncodebench.images import recipes, task_build
from asyncodebench.images.registry import REGISTRY_PORT_ENV, ensure_registry, registry_port_from_env
from asyncodebench.images.toolkit import ImageBuildError, cache_dir

DEFAULT_MAP = Path("build/rebuilt-images.json")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task_id", help="asyncodebench:<name> (a task with a recipe)")
    parser.add_argument("--repo", default=None, help="URL or local git path of the repository "
                                                     "(default: the task's repository_url)")
    parser.add_argument("--base", default=None, help="base image (default: python:<recipe python>-slim); "
                                                     "`local` makes a Debian base here with mmdebstrap")
    parser.add_argument("--push", default=None, metavar="REGISTRY",
                        help=f"registry to push to (default: the local one, 127.0.0.1:${REGISTRY_PORT_ENV} or 5000, "
                             "started when it is not up)")
    parser.add_argument("--map", type=Path, default=DEFAULT_MAP, help=f"image map to record it in ({DEFAULT_MAP})")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every step (cold build)")
    return parser.parse_args(argv)


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        recipe = recipes.load(args.task_id)
    except recipes.RecipeError as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
    started = time.monotonic()
    try:
        registry = args.push
        if registry is None:
            port = registry_port_from_env()
            ensure_registry(port)
            registry = f"127.0.0.1:{port}"
        built = task_build.build(recipe, args.repo or recipe.repository_url, args.base, registry, cache_dir(),
                                 no_cache=args.no_cache)
    except (task_build.BuildError, ImageBuildError) as exc:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
    previous = task_build.record(args.map, built)
    print(f"{built.task_id}: built in {time.monotonic() - started:.1f} s on {built.base_image} "
          f"(Python {built.python_version}), {built.size_bytes / 1e6:.0f} MB, content {built.content_sha256[:16]}",
          file=sys.stderr)
    print(task_build.map_change(args.map, previous, built), file=sys.stderr)
    print(built.pinned_ref)
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
