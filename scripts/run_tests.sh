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
# Two tiers, every test once. The fast tier (everything not marked docker; tests/conftest.py marks each test whose
# fixtures reach Docker) runs with DOCKER_HOST pointing nowhere, which proves it needs no Docker, on one pytest-xdist
# worker per CPU (its session fixtures, Chromium and the Hub mirrors, are per worker on free ports and own temp
# folders); then the container tier, in one process, so each shared run is made once. The 25 slowest of each are
# listed, to keep the suite's time in view.
tier() {  # pytest's exit 5 (no test selected) is fine for one tier when arguments pick tests of the other only
    local status=0
    "$@" || status=$?
    if ((status != 0 && status != 5)); then exit "$status"; fi
}
tier env DOCKER_HOST=unix:///nonexistent/docker.sock .venv/bin/python -m pytest -q --durations=25 -n auto \
    --dist worksteal -m "not docker" tests "$@"
tier .venv/bin/python -m pytest -q --durations=25 -m docker tests "$@"
