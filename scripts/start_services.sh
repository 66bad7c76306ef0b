#!/usr/bin/env bash
# Start what the Docker-backed tests and the demo need, unless it already runs:
#   - the Docker Engine (dockerd, as root, no systemd), log in ${ASYNCODEBENCH_DOCKERD_LOG:-/tmp/dockerd.log}
#   - a Docker registry on 127.0.0.1:${ASYNCODEBENCH_REGISTRY_PORT:-5000} (Debian's docker-registry),
#     storage under ~/.cache/asyncodebench/registry-<port>/
# Safe to run any number of times; returns once both answer.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${ASYNCODEBENCH_REGISTRY_PORT:-5000}"

wait_for() {  # wait_for <seconds> <what> <command...>
    local seconds="$1" what="$2"; shift 2
    for _ in $(seq $((seconds * 5))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    echo "error: $what did not come up within ${seconds}s" >&2
    return 1
}

if ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null; then
        echo "error: dockerd is not installed; run: apt-get install -y docker.io" >&2
        exit 1
    fi
    log="${ASYNCODEBENCH_DOCKERD_LOG:-/tmp/dockerd.log}"
    echo "starting dockerd (log: $log)" >&2
    nohup dockerd >"$log" 2>&1 </dev/null &
    wait_for 60 "dockerd (see $log)" docker info
fi

# The registry's config and start-up live in one place, the library, which the image build uses too.
python="$root/.venv/bin/python"
if [[ ! -x "$python" ]]; then
    echo "error: no virtual environment at $root/.venv; run: bash scripts/setup_machine.sh" \
         "(or only its Python part: bash scripts/install_python_env.sh)" >&2
    exit 1
fi
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -c '
import sys
from asyncodebench.images.registry import ensure_registry
from asyncodebench.images.toolkit import ImageBuildError
try:
    ensure_registry(int(sys.argv[1]))
except ImageBuildError as exc:
    sys.exit(f"error: {exc}")
' "$port"
echo "docker: up; registry: http://127.0.0.1:$port/v2/" >&2
