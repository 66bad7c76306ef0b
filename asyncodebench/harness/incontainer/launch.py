"""Start pytest for evaluated code with only the image's own plugins and start-up files.

Runs as the unprivileged sandbox user: `python -s <io>/launch.py <io>/launch.json <pytest args...>`, with no
PYTHONPATH in its environment. Standard library only, Python >= 3.6. It

- drops its own folder from `sys.path` and the pytest variables that add options or plugins from the environment;
- disables plugin auto-loading, imports pytest and the plugins the harness recorded from the image (before the patch
  was applied) while the work tree is not yet on `sys.path`, so nothing in the tree can stand in for them, and
  registers those plugins itself;
- then puts the work tree's import roots after the standard library and before site-packages (the tree cannot
  shadow the standard library in this process) and sets PYTHONPATH for subprocesses as the official evaluator does;
- and, when the session ends, before any report is written, kills every other process of the sandbox user except
  its own ancestors, so nothing the tests started can rewrite the report afterwards.
"""

import json
import os
import signal
import sys

KILL_ROUNDS = 50


def main():
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    with open(sys.argv[1]) as handle:
        cfg = json.load(handle)
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP"):
        os.environ.pop(name, None)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

    # The image's own PYTHONPATH: folders outside the work tree are the image's (trusted) and come first, so pytest
    # and plugins installed there load; folders inside the work tree hold evaluated code and wait with the roots.
    image_entries = [p for p in (cfg.get("image_pythonpath") or "").split(os.pathsep) if p]
    in_tree = [p for p in image_entries if p == cfg["workdir"] or p.startswith(cfg["workdir"] + "/")]
    outside = [p for p in image_entries if p not in in_tree]
    insert_before_site_packages(outside)

    import importlib
    import pytest
    # Registered as objects, not with -p: -p would import them again after the tree is on sys.path (and warn that
    # they were imported before the assertion rewriter, which `filterwarnings = error` turns into an error).
    plugins = [load_plugin(importlib, spec) for spec in cfg["plugins"]]

    # The official order, after the standard library: the work tree's roots, then the image's PYTHONPATH.
    insert_before_site_packages(cfg["import_roots"] + in_tree, before=outside[:1])
    os.environ["PYTHONPATH"] = os.pathsep.join(cfg["import_roots"] + image_entries)
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    code = pytest.main(sys.argv[1:], plugins=plugins + [guard(pytest)])
    sys.stdout.flush()
    sys.exit(int(code))


def load_plugin(importlib, spec):
    """An entry point's object: `module` or `module:attribute.path`."""
    module, _, attributes = spec.partition(":")
    found = importlib.import_module(module)
    for name in filter(None, attributes.split(".")):
        found = getattr(found, name)
    return found


def insert_before_site_packages(entries, before=()):
    """Put `entries` on sys.path after the standard library: before `before[0]` if given, else before the first
    site-packages folder; an entry already there (e.g. from an editable install's .pth) moves."""
    sys.path[:] = [entry for entry in sys.path if entry not in entries]
    anchors = [sys.path.index(b) for b in before if b in sys.path]
    site = next((i for i, entry in enumerate(sys.path) if entry.endswith(("site-packages", "dist-packages"))),
                len(sys.path))
    index = anchors[0] if anchors else site
    sys.path[index:index] = [e for i, e in enumerate(entries) if e not in entries[:i]]


def guard(pytest):
    """A plugin that ends every process the tests left behind before any plugin writes its report.

    A hook wrapper, and the outermost one: pytest-json-report writes its report from a `tryfirst` implementation of
    the same hook, which runs before any plain implementation, so only a wrapper is sure to run before it.
    """
    class Guard(object):
        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_sessionfinish(self):
            end_other_processes()
            yield
    return Guard()


def ancestors():
    pids, pid = {os.getpid()}, os.getppid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open("/proc/%d/status" % pid) as handle:
                pid = int(next(line for line in handle if line.startswith("PPid:")).split()[1])
        except (OSError, StopIteration, ValueError):
            break
    return pids


def is_zombie(pid):
    with open("/proc/%s/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def end_other_processes():
    keep, uid = ancestors(), os.getuid()
    for _ in range(KILL_ROUNDS):
        killed = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in keep:
                continue
            try:
                if os.stat("/proc/" + entry).st_uid != uid or is_zombie(entry):
                    continue
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except OSError:
                continue
        if not killed:
            return


if __name__ == "__main__":
    main()
