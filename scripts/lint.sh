#!/usr/bin/env bash
# Lint and type-check the kit with the virtual environment's tools (configured in pyproject.toml): ruff over the
# repository (pyflakes, pycodestyle, import order, docstrings), mypy over the library (asyncodebench/).
# Run by scripts/run_tests.sh before the tests; needs .venv (scripts/install_python_env.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
.venv/bin/python -m ruff check .
.venv/bin/python -m mypy
