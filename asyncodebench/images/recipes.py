"""Build recipes of task images rebuilt from public source (kept beside the task sources, not in the rows).

A recipe is `<task source>.image.yaml` beside the task's `.yaml` (`data/tasks/<name>.image.yaml`,
`data/demo/task.image.yaml`) and is read together with the task source, which gives the repository and the base
revision. All recipes share one Dockerfile (`data/tasks/Dockerfile`); the recipe supplies its build arguments and
the pinned requirements. The recipe digest covers the recipe, the Dockerfile and the task facts the build uses, so
a map entry says exactly which recipe made an image.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = PROJECT_ROOT / "data"
DOCKERFILE = DATA_DIR / "tasks" / "Dockerfile"
DEMO_TASK_ID = "asyncodebench-demo:minicache"
WORKDIR = "/testbed"
RECIPE_KEYS = {"python", "requirements", "system_packages", "pythonpath", "interpreter_aliases"}
# The harness reads each evaluation's results through these; a recipe without them cannot be graded.
HARNESS_REQUIREMENTS = ("pytest", "pytest-json-report")
# name==version, optionally with an environment marker (`; python_version < "3.11"`).
PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!_-]+(\s*;\s*[^;]+)?$")


class RecipeError(ValueError):
    """A recipe is missing or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class Recipe:
    """One task's image recipe, with the task facts it builds from."""

    task_id: str
    path: Path
    repository_url: str
    base_revision: str
    python: str  # the version the official image uses, e.g. "3.10"; the default base is python:<it>-slim
    requirements: tuple[str, ...]  # name==version, installed from the package index
    system_packages: tuple[str, ...] = ()
    pythonpath: str = ""  # the image's PYTHONPATH, relative to the work tree (e.g. "src")
    interpreter_aliases: tuple[str, ...] = ()  # e.g. ("python3.10",) when the evaluator names that interpreter

    @property
    def default_base(self) -> str:
        """The base image when none is given: `python:<python>-slim`."""
        return f"python:{self.python}-slim"

    def build_args(self) -> dict[str, str]:
        """The Dockerfile's build arguments: system packages, interpreter aliases, and the PYTHONPATH under the work
        tree."""
        return {
            "SYSTEM_PACKAGES": " ".join(self.system_packages),
            "INTERPRETER_ALIASES": " ".join(self.interpreter_aliases),
            "PYTHONPATH": ":".join(WORKDIR if p == "." else f"{WORKDIR}/{p}" for p in self.pythonpath.split(":") if p),
        }

    def requirements_txt(self) -> str:
        """The pinned requirements as a `requirements.txt`, one a line."""
        return "".join(f"{r}\n" for r in self.requirements)

    def digest(self) -> str:
        """sha256 over everything that decides the image: the recipe, the Dockerfile and the task facts."""
        facts = {k: v for k, v in asdict(self).items() if k != "path"}
        blob = json.dumps(facts, sort_keys=True).encode() + b"\0" + DOCKERFILE.read_bytes()
        return hashlib.sha256(blob).hexdigest()


def task_source(task_id: str, data_dir: Path = DATA_DIR) -> Path:
    """The task's source file: `data/tasks/<name>.yaml`, or the demo's `data/demo/task.yaml`."""
    if task_id == DEMO_TASK_ID:
        return data_dir / "demo" / "task.yaml"
    prefix, _, name = task_id.partition(":")
    if prefix != "asyncodebench" or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise RecipeError(f"{task_id!r} is not a task id of the form asyncodebench:<name> (or {DEMO_TASK_ID})")
    return data_dir / "tasks" / f"{name}.yaml"


def recipe_path(task_id: str, data_dir: Path = DATA_DIR) -> Path:
    """The task's image recipe: its source file with the suffix `.image.yaml`."""
    return task_source(task_id, data_dir).with_suffix(".image.yaml")


def load(task_id: str, data_dir: Path = DATA_DIR) -> Recipe:
    """The recipe of `task_id`, checked.

    Raises:
        RecipeError: the task, its recipe or a field is missing or malformed.
    """
    source_path, path = task_source(task_id, data_dir), recipe_path(task_id, data_dir)
    if not source_path.is_file():
        raise RecipeError(f"no task source {source_path} for {task_id}")
    if not path.is_file():
        raise RecipeError(f"{task_id} has no image recipe ({path}); the Apache TVM tasks have none by design "
                          "(see 'Task images rebuilt from source' in docs/images.md)")
    source: dict[str, Any] = yaml.safe_load(source_path.read_text(encoding="utf-8"))
    raw: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = sorted(set(raw) - RECIPE_KEYS)
    if unknown:
        raise RecipeError(f"{path}: unknown key(s) {unknown}; a recipe has {sorted(RECIPE_KEYS)}")
    if not isinstance(raw.get("python"), str) or not re.fullmatch(r"3\.\d+", raw["python"]):
        raise RecipeError(f"{path}: `python` must be a version like \"3.10\" (quoted), got {raw.get('python')!r}")
    requirements = tuple(raw.get("requirements") or ())
    loose = [r for r in requirements if not PINNED.match(str(r))]
    if loose:
        raise RecipeError(f"{path}: requirements must be pinned as name==version, not {loose}")
    names = {r.split("==")[0].split("[")[0].lower() for r in requirements}
    missing = [n for n in HARNESS_REQUIREMENTS if n not in names]
    if missing:
        raise RecipeError(f"{path}: requirements lack {missing}, which the harness needs to read results")
    return Recipe(
        task_id=task_id, path=path, repository_url=source["repository_url"],
        base_revision=source["base_revision"], python=str(raw["python"]), requirements=requirements,
        system_packages=tuple(raw.get("system_packages") or ()), pythonpath=str(raw.get("pythonpath") or ""),
        interpreter_aliases=tuple(raw.get("interpreter_aliases") or ()),
    )


def all_task_ids(data_dir: Path = DATA_DIR) -> list[str]:
    """Every official task that has a recipe, in name order."""
    return [f"asyncodebench:{p.name[:-len('.image.yaml')]}"
            for p in sorted((data_dir / "tasks").glob("*.image.yaml"))]
