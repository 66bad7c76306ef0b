#!/usr/bin/env bash
# Create (or reuse) the kit's virtual environment at <repo>/.venv and install this project with its test extras in it
# (datasets, pyarrow, docker, jsonschema, olah, pytest, ...). Every script of the kit then runs .venv/bin/python.
# A virtual environment because Debian 12's Python refuses `pip install` into the system (PEP 668:
# "externally-managed-environment") and a stock system has no pip at all.
# Needs `python3` with its venv module (Debian: python3, python3-venv; scripts/setup_machine.sh installs them) and a
# reachable package index. Idempotent: a working venv is reused and pip only installs what is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="$venv/bin/python"

if ! "$python" -m pip --version >/dev/null 2>&1; then
    if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
        echo "error: python3 cannot create a virtual environment; run: apt-get install -y python3 python3-venv" >&2
        exit 1
    fi
    # Missing, or broken (its python3 was removed or upgraded): make it afresh.
    echo "creating the virtual environment $venv" >&2
    python3 -m venv --clear "$venv"
fi

"$python" -m pip install -qq --disable-pip-version-check -e "$root[test]"
# Fail here, not later, if the install did not give what the kit imports.
"$python" -c "import asyncodebench, datasets, docker, jsonschema, pyarrow, olah" >/dev/null
echo "python environment: $python" >&2
