#!/usr/bin/env bash
# Set up this machine (packages, Docker Engine, local registry) and run the whole test suite, Docker tests included.
# Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup_machine.sh
python3 -m pytest -q tests "$@"
