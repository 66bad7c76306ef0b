"""Scripts for the scripted model server (asyncodebench/agents/scripted_server.py): what scripted agents do on the
demo task, made from the demo's own patches (the gold solution and its producer and consumer halves)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.checkout import DEMO_DIR, ROOT, SCRIPTS, script_env

DEMO_TASK = "asyncodebench-demo:minicache"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
PATCHES = DEMO_DIR / "patches"
ESCAPE_FILE = "/tmp/asyncodebench-agent-escape.txt"  # on the host: a hostile agent must never reach it


def apply(patch: str) -> str:
    """A command that applies a patch to the work tree, as an agent writing files would."""
    return (f"cat > /tmp/change.patch <<'PATCH_END'\n{patch}PATCH_END\n"
            "git apply /tmp/change.patch && rm /tmp/change.patch")


def demo_patch(name: str) -> str:
    return (PATCHES / f"{name}.patch").read_text()


def version_bump(version: str) -> str:
    """A command that changes minicache/__init__.py's version line (a writable path of both specialists)."""
    return f"sed -i 's/^__version__ = .*/__version__ = \"{version}\"/' minicache/__init__.py"


def hostile_commands(writable_file: str) -> list[str]:
    """Commands an agent should not be able to use to harm anything: writes outside its writable paths (a test,
    a new file, the repository's .git), network, the host, the container's init, a flood of output."""
    return [
        f"echo '# an in-scope edit' >> {writable_file}",
        "echo 'def test_forged(): pass' >> tests/test_core.py",
        "echo scratch > notes.txt",
        "touch .git/owned; echo git-dir-exit=$?",
        f"echo escaped > {ESCAPE_FILE}; ls -la /tmp",
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"; echo network-exit=$?",
        "kill -9 1; echo init-exit=$?",
        "ls /var/run/docker.sock; id -u",
        "yes flood | head -c 5000000",
        SUBMIT,
    ]


def write_scripts(path: Path, scripts: dict[str, list[Any]]) -> Path:
    path.write_text(json.dumps(scripts))
    return path


def run_agents(scripts: Path, dataset: Path, output_dir: Path, run_id: str, *flags: str,
               timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """scripts/run_agents.py with the scripted model, as a user runs it (`env`: variables to add or change)."""
    return subprocess.run([sys.executable, str(SCRIPTS / "run_agents.py"), "--model", "scripted", "--scripts",
                           str(scripts), "--dataset", str(dataset), "--output-dir", str(output_dir),
                           "--run-id", run_id, *flags], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=script_env(env))


def manager_reply(*actions: dict[str, str]) -> dict[str, str]:
    """A manager's reply carrying `actions` (the action format of asyncodebench/agents/manager.py)."""
    return {"content": json.dumps({"actions": list(actions)})}


def waiting(text: str, command: str) -> dict[str, Any]:
    """A scripted reply given only once the agent has been told `text` (until then it runs `sleep 1`)."""
    return {"after": text, "commands": [command]}


# The native demo task (vecstats): C++ built by the task's build step (data/native_builds.yaml), loaded by Python.
NATIVE_TASK = "asyncodebench-demo:vecstats"
NATIVE_PATCHES = ROOT / "data" / "demo-native" / "patches"
NATIVE_BUILD = "cmake --build build --parallel"  # the task's build command, as the agents' prompt gives it
NATIVE_TESTS = "python3 -m pytest -q -p no:cacheprovider tests"


def native_patch(name: str) -> str:
    return (NATIVE_PATCHES / f"{name}.patch").read_text()
