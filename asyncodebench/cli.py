"""What the command-line scripts share: their exit codes, how they stop with one, and their argument checks.

- Exit codes (`EXIT_*`): one meaning each, in every script. A script's `main` is wrapped in `entry_point`; anything
  below it stops the script by raising `Exit(code, message)`, printed as one `error: ...` line on stderr.
- Argument checks: each checker is an argparse `type=` callable: a bad value makes argparse print one line naming
  the flag and what to give instead, and exit with EXIT_BAD_ARGUMENTS, before anything is loaded or started.
- Loaders that stop the script with the right code when what they load is not there: `load_rows`, `task`,
  `client_for_image`.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from asyncodebench.untrusted import terminal_text

if TYPE_CHECKING:
    from docker import DockerClient

    from asyncodebench.dataset.rows import PublishedRows
    from asyncodebench.harness.evaluation import Settings
    from asyncodebench.harness.spec import TaskSpec

EXIT_OK = 0  # done: everything asked for was done and found sound
EXIT_PROBLEMS_FOUND = 1  # done, and problems found in what was given or checked: invalid prediction lines
#                          (evaluate.py), counts that differ (validate_task_image.py), a refused checkpoint file
#                          (rescore_checkpoints.py), images that do not match (check_images.py)
EXIT_BAD_ARGUMENTS = 2  # argparse's own code: fix the command line (or the files and folders it names)
EXIT_INFRASTRUCTURE = 3  # the Hub, the Docker daemon, an image, the Ray cluster or an overlay: fix it and rerun
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM)

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MIN_MEMORY_BYTES = 64 << 20  # below this neither pytest nor the harness's own steps can start
MIN_PIDS = 32  # the harness's shell, timeout, python and pytest's own threads need a few processes
MIN_CPUS = 0.01  # the smallest CPU share Docker accepts
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*([bkmg]?)b?", re.IGNORECASE)


class Exit(Exception):
    """Stop the script with exit code `code`, printing `message` (when there is one) as `error: <message>` on stderr;
    the script's `main` (wrapped in `entry_point`) catches it."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code, self.message = code, message


Main = TypeVar("Main", bound=Callable[..., int])


def entry_point(main: Main) -> Main:
    """`@entry_point` on a script's `main`: an `Exit` raised in it becomes its message on stderr and its code."""
    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> int:
        try:
            return main(*args, **kwargs)
        except Exit as stop:
            if stop.message:
                # Messages name files, model names and task ids: never an escape sequence on the terminal.
                print(f"error: {terminal_text(stop.message, newlines=True)}", file=sys.stderr)
            return stop.code

    return run  # type: ignore[return-value]


def run_id(text: str) -> str:
    """A run id names a folder inside --output-dir: letters, digits, `.`, `_`, `-`, not starting with `.` or `-`."""
    if not RUN_ID_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a usable run id: give 1 to 100 characters among letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (it names a folder inside --output-dir)")
    return text


def memory_size(text: str) -> str:
    """A Docker memory size such as `512m` or `4g` (at least 64m), returned in a canonical form (`4096m` -> `4g`)."""
    match = _MEMORY.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a memory size: give a number with a unit, such as 512m or 4g")
    number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * _UNITS[unit])
    if size < MIN_MEMORY_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too little memory (0 would remove the limit): give at least 64m, such as 512m or 4g")
    for suffix in ("g", "m", "k"):
        if size % _UNITS[suffix] == 0:
            return f"{size // _UNITS[suffix]}{suffix}"
    return str(size)


def cpus(text: str) -> float:
    """A CPU share: at least 0.01 and, on a local daemon, at most this machine's CPU count."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of CPUs: give for example 1 or 0.5") from None
    if not math.isfinite(value) or value < MIN_CPUS:
        raise argparse.ArgumentTypeError(
            f"{text!r} CPUs would remove or break the limit: give a number of at least {MIN_CPUS}, such as 1 or 0.5")
    available = os.cpu_count() or 1
    host = os.environ.get("DOCKER_HOST", "")
    if (not host or host.startswith("unix://")) and value > available:
        raise argparse.ArgumentTypeError(
            f"{text!r} CPUs is more than this machine has ({available}); give at most {available}")
    return value


def _whole_number(text: str, hint: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{hint}") from None


def pids(text: str) -> int:
    """A process limit: a whole number of at least 32 (0 or -1 would mean no limit at all)."""
    value = _whole_number(text, " of processes: give for example 512")
    if value < MIN_PIDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} processes would remove the limit or stop the tests from starting: give at least {MIN_PIDS}, "
            "such as 512")
    return value


def positive_int(text: str) -> int:
    """A whole number above 0 (seconds, workers)."""
    value = _whole_number(text, ": give one above 0")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def positive_number(text: str, not_a_number: str, not_positive: str) -> float:
    """A finite number above 0; the messages say what is wrong with `text` otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} {not_a_number}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} {not_positive}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    return positive_number(text, "is not a number of seconds: give one above 0, such as 20",
                           "seconds: give a number of seconds above 0, such as 20")


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """--timeout, --probe-timeout, --memory, --cpus, --pids, --build-timeout, --build-space: the limits evaluate.py and
    run_task.py share."""
    parser.add_argument("--timeout", type=positive_int, default=900, help="evaluator limit in seconds (official: 900)")
    parser.add_argument("--probe-timeout", type=positive_int, default=60, help="per probe selector (official: 60)")
    parser.add_argument("--memory", type=memory_size, default="4g",
                        help="container memory limit, no swap (Docker size such as 512m or 4g; at least 64m)")
    parser.add_argument("--cpus", type=cpus, default=1.0, help="CPUs the container may use (at least 0.01)")
    parser.add_argument("--pids", type=pids, default=512, help=f"container process limit (at least {MIN_PIDS})")
    parser.add_argument("--build-timeout", type=positive_int, default=None,
                        help="limit in seconds of each state's native build, for tasks that rebuild native code "
                             "before evaluation (default: the task's own, data/native_builds.yaml)")
    parser.add_argument("--build-space", type=memory_size, default="4g",
                        help="what one state's native build may write over the image's build tree (a tmpfs, so "
                             "memory; Docker size)")


def add_reference_arguments(parser: argparse.ArgumentParser) -> None:
    """--repo-pattern, --reference-revision, --overlays-dir, --overlays-url: where the scripts that run a task's
    reference state (check_claims.py, attribute_probes.py) find its repository and overlays."""
    parser.add_argument("--repo-pattern", default=None,
                        help="where each task's repository is, {name} = task name (default: the row's repository_url)")
    parser.add_argument("--reference-revision", default=None,
                        help="the commit holding the complete code (default: the base revision's parent)")
    parser.add_argument("--overlays-dir", type=Path, default=None, help="checkout holding the overlay patches")
    parser.add_argument("--overlays-url", default=None, help="base URL to fetch the overlay patches from")


def task_overlays(args: argparse.Namespace, spec: TaskSpec) -> dict[str, bytes]:
    """The task's overlay patches from --overlays-dir / --overlays-url (none for a task without overlays).

    Raises:
        Exit: EXIT_INFRASTRUCTURE when an overlay cannot be had.
    """
    from asyncodebench.harness.overlays import OverlayError, OverlaySource

    if not spec.overlays:
        return {}
    try:
        return OverlaySource(directory=args.overlays_dir, url=args.overlays_url).load(spec.overlays)
    except OverlayError as exc:
        raise Exit(EXIT_INFRASTRUCTURE, str(exc)) from exc


def reference_patch(args: argparse.Namespace, row: dict[str, Any], spec: TaskSpec, overlays: dict[str, bytes],
                    whole: bool = False) -> bytes:
    """The patch from the overlaid base to the reference state, restricted to every agent's writable paths (with
    `whole`, to the whole reference commit), from the repository --repo-pattern names (default: the row's
    repository_url).

    Raises:
        Exit: EXIT_INFRASTRUCTURE when the repository or a revision cannot be had.
    """
    from asyncodebench.images import validation
    from asyncodebench.images.task_build import BuildError
    from asyncodebench.images.toolkit import cache_dir

    name = spec.task_id.split(":", 1)[1]
    repo = args.repo_pattern.format(name=name) if args.repo_pattern else row["repository_url"]
    paths = tuple(dict.fromkeys([*spec.single_agent_paths, *(p for a in spec.specialists for p in a.writable_paths)]))
    if whole:
        paths = ()
    try:
        return validation.reference_patch(repo, cache_dir(), spec.base_revision, args.reference_revision, paths,
                                          overlays)[1]
    except BuildError as exc:
        raise Exit(EXIT_INFRASTRUCTURE, str(exc)) from exc


def settings(args: argparse.Namespace, run_probes: bool) -> Settings:
    """The evaluation settings the flags of `add_limit_arguments` give."""
    from asyncodebench.harness.evaluation import Settings
    from asyncodebench.harness.sandbox import Limits

    return Settings(args.timeout, args.probe_timeout, run_probes,
                    Limits(args.memory, args.cpus, args.pids, build_space=args.build_space), args.build_timeout)


def resume_command(script: str, argv: Sequence[str], run_id: str) -> str:
    """The command line that resumes a run, to paste as it is: this interpreter (a bare `python` may lack the kit),
    the script and the arguments given, with `--run-id` added when the id was generated, and without `--force`,
    which would redo the finished work."""
    here = Path.cwd()

    def shown(path: str) -> str:
        absolute = Path(path).absolute()
        return str(absolute.relative_to(here)) if absolute.is_relative_to(here) else path

    args = [a for a in argv if a != "--force"]
    if not any(a == "--run-id" or a.startswith("--run-id=") for a in args):
        args += ["--run-id", run_id]
    return shlex.join([shown(sys.executable), shown(script), *args])


def writable_folder_problem(folder: Path) -> str | None:
    """Why results cannot be written in `folder` (created if missing), or None when they can."""
    if folder.exists() and not folder.is_dir():
        return f"{folder} exists and is not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write in {folder} ({exc.strerror or exc})"
    return None


def load_rows(dataset: str, revision: str | None) -> PublishedRows:
    """The published rows.

    Raises:
        Exit: EXIT_INFRASTRUCTURE when the dataset cannot be reached, EXIT_BAD_ARGUMENTS when the path or id is wrong.
    """
    from asyncodebench.dataset.rows import DatasetUnavailableError, load_published

    try:
        return load_published(dataset, revision)
    except DatasetUnavailableError as exc:
        raise Exit(EXIT_INFRASTRUCTURE, str(exc)) from exc
    except FileNotFoundError as exc:
        raise Exit(EXIT_BAD_ARGUMENTS, str(exc)) from exc


def task(dataset: str, revision: str | None, task_id: str, images: Path | None) -> tuple[dict[str, Any], TaskSpec]:
    """The task's row and its `TaskSpec`, on the image the map `images` names for it, if any.

    Raises:
        Exit: EXIT_BAD_ARGUMENTS for an unknown task or a bad image map, EXIT_INFRASTRUCTURE when the dataset cannot
            be reached.
    """
    from asyncodebench.harness.spec import TaskSpec
    from asyncodebench.images import image_map

    published = load_rows(dataset, revision)
    rows = {t["task_id"]: t for t in published.rows.tasks}
    if task_id not in rows:
        raise Exit(EXIT_BAD_ARGUMENTS, f"unknown task {task_id!r}; the dataset has {sorted(rows)}")
    spec = TaskSpec.from_rows(rows[task_id], published.rows.dependencies)
    if images:
        try:
            entries = {k: v for k, v in image_map.load(images).items() if k == task_id}
            spec = image_map.apply({task_id: spec}, entries, images)[task_id]
        except image_map.ImageMapError as exc:
            raise Exit(EXIT_BAD_ARGUMENTS, str(exc)) from exc
    return rows[task_id], spec


def client_for_image(spec: TaskSpec, allow_pull: bool = False) -> DockerClient:
    """A Docker client, once the task's pinned image is there with its digest (pulled by digest when it is not and
    `allow_pull`).

    Raises:
        Exit: EXIT_INFRASTRUCTURE when the daemon is unreachable, or the image missing or with another digest.
    """
    from asyncodebench.harness.sandbox import SandboxUnavailableError, docker_client
    from asyncodebench.images.digests import MATCH, local_status, pull

    try:
        client = docker_client()
        image = local_status(client, spec.task_id, spec.image, spec.pinned_ref)
        if image.state != MATCH and allow_pull:
            image = pull(client, spec.task_id, spec.image, spec.pinned_ref)
    except SandboxUnavailableError as exc:
        raise Exit(EXIT_INFRASTRUCTURE, str(exc)) from exc
    if image.state != MATCH:
        hint = "" if allow_pull else f"; pull it by digest (docker pull {spec.pinned_ref}) or rerun with --pull"
        raise Exit(EXIT_INFRASTRUCTURE, f"image {spec.pinned_ref} is {image.state}: {image.detail}{hint}")
    return client


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """A script's --help: its docstring as written, and every option's default shown."""


class DeprecatedAlias(argparse.Action):
    """An old flag name kept working for one release: it sets the new flag's value and warns on stderr.

    `parser.add_argument("--out", action=DeprecatedAlias, new="--output-dir", dest="output_dir", type=Path)`.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        """Set the new flag's value; say which name to use from now on."""
        print(f"warning: {option_string} is deprecated and goes in the next release; use {self.new}",
              file=sys.stderr)
        setattr(namespace, self.dest, values)
