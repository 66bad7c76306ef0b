"""Problems found in sources or rows, reported all at once, one line each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong, located by source file, row id and field."""

    source: str
    row: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: row {self.row}: field {self.field}: {self.message}"


class SourceError(Exception):
    """The sources (or rows) are invalid; nothing was written. Fix every listed problem and build again."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the dataset sources; nothing was written:\n{lines}")
