#!/usr/bin/env bash
# Install what the release kit needs on a fresh Debian 12 machine (as root), then start the services.
# Idempotent: packages already present are kept, a working .venv is reused, services already running are reused.
#   Debian: python3, python3-venv (the kit's virtual environment), docker.io (Docker Engine), docker-registry (a
#           registry on 127.0.0.1), mmdebstrap (the demo image), git, chromium (the tests open the HTML reports in
#           it headless through Playwright, which cannot download a browser of its own here)
#   PyPI:   this project with its test extras (datasets, pyarrow, docker, jsonschema, olah, pytest-json-report, ...),
#           installed into <repo>/.venv by scripts/install_python_env.sh (Debian's Python refuses system installs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

need=()
for pkg in python3 python3-venv docker.io docker-registry mmdebstrap git chromium; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
    echo "installing Debian packages: ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

bash "$root/scripts/install_python_env.sh"  # <repo>/.venv; fails here, not later, if pip did not work

bash "$root/scripts/start_services.sh"
