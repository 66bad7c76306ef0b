"""How the test suite is laid out: what tests share lives in tests/helpers/ (or is a fixture of conftest.py), so no
file under tests/ imports a test module or conftest."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _forbidden(module: str) -> bool:
    """A test module (`test_*`) or conftest, by any dotted path (`tests.test_x`, `conftest`, ...)."""
    return any(part == "conftest" or part.startswith("test_") for part in module.split("."))


def _imported_test_modules(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.module and _forbidden(node.module):
                found.append("." * node.level + node.module)
            else:  # `from tests import test_x`, `from . import conftest`
                found += [a.name for a in node.names if _forbidden(a.name)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
              and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) in ("import_module",
                                                                                              "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and _forbidden(node.args[0].value)):
            found.append(node.args[0].value)
    return found


def test_no_file_under_tests_imports_a_test_module_or_conftest() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert TESTS / "helpers" / "__init__.py" in files and TESTS / "conftest.py" in files  # the walk sees them
    offenders = {str(f.relative_to(TESTS)): names for f in files
                 if (names := _imported_test_modules(ast.parse(f.read_text(encoding="utf-8"), str(f))))}
    assert offenders == {}, "share through tests/helpers/ or a fixture, never by importing a test module or conftest"
