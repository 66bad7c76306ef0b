"""Run a task's executable claim checks in a prepared work tree and write what each one printed.

Started by root, `python -I <io>/claims.py <io>/claims.json <out>/claims-result.json`; it becomes the unprivileged
sandbox user first (the checks run the task's code, which is evaluated code like any other), then runs each check
as `python -c CODE` in the work tree, with the image's PYTHONPATH, in a process of its own under its own time limit,
so one check's imports, caches or crash never reach another. Standard library only, Python >= 3.6.
"""

import json
import os
import subprocess
import sys

OUTPUT_TAIL_CHARS = 2000


def main():
    """Run every check of the configuration; write the results as a JSON list."""
    with open(sys.argv[1]) as handle:
        cfg = json.load(handle)
    os.setgroups([])
    os.setgid(cfg["sandbox_gid"])
    os.setuid(cfg["sandbox_uid"])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": cfg["home"],
           "TMPDIR": "/tmp", "PYTHONPATH": cfg["pythonpath"], "PYTHONDONTWRITEBYTECODE": "1"}
    os.makedirs(cfg["home"], exist_ok=True)
    results = []
    for check in cfg["checks"]:
        results.append(run(check, cfg["workdir"], env, cfg["seconds"]))
    with open(sys.argv[2], "w") as handle:
        json.dump(results, handle)


def run(check, workdir, env, seconds):
    """One check: `passed` when it exits 0 and prints exactly what it expects (surrounding whitespace aside)."""
    try:
        done = subprocess.run([sys.executable, "-c", check["code"]], cwd=workdir, env=env, timeout=seconds,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return {"key": check["key"], "outcome": "timed_out", "exit_code": None,
                "stdout": _tail(exc.stdout), "stderr": _tail(exc.stderr)}
    stdout = done.stdout.decode("utf-8", "replace")
    passed = done.returncode == 0 and stdout.strip() == check["expect"].strip()
    return {"key": check["key"], "outcome": "passed" if passed else "failed", "exit_code": done.returncode,
            "stdout": stdout[-OUTPUT_TAIL_CHARS:], "stderr": _tail(done.stderr)}


def _tail(raw):
    return (raw or b"").decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:]


if __name__ == "__main__":
    main()
