"""Test targets as the rows give them: upstream's `test_targets` lists hold pytest options beside the test files.

cookiecutter's list ends with `--deselect=tests/...` options and marshmallow's holds `addopts=` (the value of the
evaluator's `-o`); the lists are upstream facts and stay as they are. What is a file is what the harness restores
and what the statement lists as tests; the options are passed to pytest, never treated as paths.
"""

from __future__ import annotations

from collections.abc import Iterable


def is_option(entry: str) -> bool:
    """Whether a test-target entry is a pytest option (`--deselect=...`) or an option's value (`addopts=`)."""
    return entry.startswith("-") or "=" in entry.split("::", 1)[0]


def target_files(targets: Iterable[str]) -> tuple[str, ...]:
    """The entries that name files or folders of the tree (node ids included), in order."""
    return tuple(t for t in targets if not is_option(t))


def target_options(targets: Iterable[str]) -> tuple[str, ...]:
    """The entries that are pytest options or their values, in order."""
    return tuple(t for t in targets if is_option(t))
