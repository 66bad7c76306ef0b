#!/usr/bin/env bash
# Set up this machine (packages, .venv, Docker Engine, local registry), lint and type-check the kit
# (scripts/lint.sh), and run the whole test suite, Docker tests included, with the virtual environment's Python.
# Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup_machine.sh
# The Ray executor's tests start a local Ray cluster: the tests need the kit's `ray` extra, which the demo does not.
if ! .venv/bin/python -c "import ray" >/dev/null 2>&1; then
    .venv/bin/python -m pip install -qq --disable-pip-version-check -e ".[test,ray]"
fi
bash scripts/lint.sh
.venv/bin/python -m pytest -q --durations=25 tests "$@"  # the 25 slowest, to keep the suite under 15 minutes
