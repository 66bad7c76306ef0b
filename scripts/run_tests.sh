#!/usr/bin/env bash
# Set up this machine (packages, .venv, Docker Engine, local registry) and run the whole test suite, Docker tests
# included, with the virtual environment's Python.
# Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup_machine.sh
.venv/bin/python -m pytest -q tests "$@"
