"""Start pytest for evaluated code with only the image's own plugins and start-up files.

Started by root, `python -s <io>/launch.py <io>/launch.json <pytest args...>`, with no PYTHONPATH in its
environment; it reads its configuration (root's alone to read) and becomes the unprivileged sandbox user before
anything else happens, so the `timeout` above it stays root's and out of the evaluated code's reach. Standard library
only, Python >= 3.6. It

- drops its own folder from `sys.path` and the pytest variables that add options or plugins from the environment;
- disables plugin auto-loading, imports pytest and the plugins the harness recorded from the image (before the patch
  was applied) while the work tree is not yet on `sys.path`, so nothing in the tree can stand in for them, and
  registers those plugins itself;
- then puts the work tree's import roots after the standard library and before site-packages (the tree cannot
  shadow the standard library in this process) and sets PYTHONPATH for subprocesses as the official evaluator does;
- adds the sentinel tests (known outcomes, names made from a secret of this process) among the collected tests, so
  that a report rewritten from inside this process shows it (METRICS decision 11), and installs an audit hook
  that flags what honest code under test does not do (for review, never scored);
- and, when the session ends, before any report is written, ends every other process of the sandbox user with one
  `kill(-1, SIGKILL)`: the kernel signals them all under one lock, so a process that keeps re-forking cannot slip
  between listing and killing, and nothing the tests started can rewrite the report afterwards.
"""

import hashlib
import json
import os
import signal
import sys
import time

SENTINEL_OUTCOMES = ("passed", "failed", "error", "skipped")  # the same list is in scoring/tampering.py


def main():
    """Run pytest on the arguments after `<io>/launch.json`, set up as the module says; exit with its exit code."""
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    with open(sys.argv[1]) as handle:
        cfg = json.load(handle)
    become_sandbox_user(cfg)
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
    audit = Audit(cfg["sentinel"]["token"], cfg["workdir"]) if cfg.get("sentinel") else None
    if audit and hasattr(sys, "addaudithook"):  # Python >= 3.8
        sys.addaudithook(audit.hook)
    extra = [guard(pytest, audit)] + ([sentinels(pytest, cfg["sentinel"])] if cfg.get("sentinel") else [])
    code = pytest.main(sys.argv[1:], plugins=plugins + extra)
    sys.stdout.flush()
    sys.exit(int(code))


def become_sandbox_user(cfg):
    """Root's part ends here: nothing of the work tree has been imported, and nothing will be as root."""
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(cfg["sandbox_gid"])
        os.setuid(cfg["sandbox_uid"])


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


def guard(pytest, audit):
    """A plugin that ends every process the tests left behind before any plugin writes its report (and compares
    the test runner with the audit's snapshot).

    A hook wrapper, and the outermost one: pytest-json-report writes its report from a `tryfirst` implementation of
    the same hook, which runs before any plain implementation, so only a wrapper is sure to run before it.
    """
    class Guard(object):
        @pytest.hookimpl(tryfirst=True)
        def pytest_sessionstart(self):
            if audit:
                audit.start()

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_sessionfinish(self):
            end_other_processes()
            if audit:
                audit.compare()
            yield
    return Guard()


def end_other_processes():
    """Kill every other process of this user at once, then wait until none of them can run any more.

    kill(-1) spares only the caller (and PID 1, and other users' processes: the root `timeout` above us). The kernel
    walks the process list under a lock that fork() also needs, and a fork interrupted by the signal is undone,
    so no child is born after the walk. Killed processes become zombies, which write nothing.

    The wait has no deadline of its own: a killed process finishes the system call it is in (a write, a rename
    of the report) before it dies, and on a loaded host hundreds of them can take longer than any fixed wait, so
    the report is written only once none is left. The command's `timeout` bounds the wait; a process stopped
    there is read as such (scoring/tampering.py), never as tampering.
    """
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:  # ESRCH: there was no other process
        return
    while any(others_running(os.getuid())):
        time.sleep(0.01)


def others_running(uid):
    """The pids of `uid`'s processes other than this one that can still run (not zombies)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat("/proc/" + entry).st_uid == uid and not is_zombie(entry):
                yield int(entry)
        except OSError:
            continue


def is_zombie(pid):
    """Whether the process `pid` has ended (zombie or dead) and so can run no more code."""
    with open("/proc/%s/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")


AUDITED_EVENTS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace", "sys.setprofile",
                  "sys.addaudithook", "ctypes.dlopen", "ctypes.dlsym", "ctypes.addressof")
RUNNER_MODULES = ("_pytest", "pytest", "pluggy", "pytest_jsonreport")
AUDIT_DISTINCT = 100


class Audit(object):
    """Flags for review (never a score) of what honest code under test does not do, one line per distinct finding
    on the stderr this process started with (pytest's capture cannot hold them back).

    Two watchers find them:

    - a PEP 578 hook, installed before any evaluated code is imported (it cannot be removed), sees the garbage
      collector searched, tracing or audit hooks installed, ctypes, a function's code replaced, when the code
      causing it is a file of the work tree;
    - a snapshot of pytest's, pluggy's and the json-report plugin's modules and classes, taken when the session
      starts (pytest's own plugins have set themselves up, the tests are not yet collected) and compared when it
      ends, sees their functions, classes and methods replaced, and methods added to their classes (plain
      attribute writes on classes raise no audit event). Code a conftest imports runs before the snapshot: the
      sentinels, not this, cover it.
    """

    def __init__(self, token, workdir):
        self.prefix, self.workdir = "asyncodebench-audit %s " % token, workdir
        self.out = os.dup(2)
        self.seen = set()
        self.before = {}

    def start(self):
        """Take the snapshot of the test runner's objects (at session start)."""
        self.before = runner_objects()

    def hook(self, event, args):
        """The PEP 578 hook: flag an audited event, or a function's code replaced, caused by a file of the work tree."""
        if event == "object.__setattr__" and args[1] == "__code__":
            what = "function code replaced: %s" % getattr(args[0], "__qualname__", "?")
        elif event in AUDITED_EVENTS:
            what = event
        else:
            return
        if what not in self.seen and caused_in(self.workdir):
            self.flag(what)

    def compare(self):
        """Flag the runner's objects replaced since the snapshot, and the methods added to its classes."""
        now = runner_objects()
        for key, value in self.before.items():
            if now.get(key) is not value:
                self.flag("pytest's %s replaced" % key)
        for key in now:
            owner = key.rsplit(".", 1)[0]
            if key not in self.before and isinstance(self.before.get(owner), type):
                self.flag("pytest's %s added" % key)

    def flag(self, what):
        """Write one finding to the saved stderr: each distinct finding once, at most `AUDIT_DISTINCT` of them."""
        if what in self.seen or len(self.seen) >= AUDIT_DISTINCT:
            return
        self.seen.add(what)
        try:
            os.write(self.out, ("\n%s%s\n" % (self.prefix, what)).encode("utf-8", "replace"))
        except OSError:
            pass


def runner_objects():
    """The functions, classes and descriptors of the test runner's modules, and those of their classes."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in RUNNER_MODULES:
            continue
        found[name] = module
        for attr, value in list(vars(module).items()):
            if not is_code(value):
                continue
            found["%s.%s" % (name, attr)] = value
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                for key, member in list(vars(value).items()):
                    if is_code(member):
                        found["%s.%s.%s" % (name, attr, key)] = member
    return found


def is_code(value):
    """Whether a snapshot keeps `value`: a callable (function, class) or a descriptor."""
    return callable(value) or isinstance(value, (property, classmethod, staticmethod))


def caused_in(workdir):
    """Whether the Python code nearest the event (past the hook) is a file of the work tree."""
    frame = sys._getframe(2)
    return frame is not None and frame.f_code.co_filename.startswith(workdir + "/")


def sentinel_name(token, outcome):
    """The name of the sentinel test of `outcome`, made from the secret `token` (scoring/tampering.py makes it too)."""
    return "test_" + hashlib.sha256((token + ":" + outcome).encode()).hexdigest()[:12]


def sentinel_pass():
    """The sentinel that must pass."""
    assert True


def sentinel_fail():
    """The sentinel that must fail."""
    assert False, "a sentinel that must fail"


def sentinel_error():
    """The sentinel whose setup must error: it never runs, because its fixture does not exist."""


def sentinel_skip():
    """The sentinel that must be skipped."""
    import pytest
    pytest.skip("a sentinel that must be skipped")


def sentinels(pytest, cfg):
    """A plugin adding four tests of known outcome (pass, fail, error at setup, skip) among the collected ones.

    They are added after every other plugin has selected and deselected (trylast), so the task's own `-k`, `-m`
    and `--deselect` cannot drop them, and they need no naming convention of the task's configuration. A report
    rewritten from inside this process (outcomes forced, counts or tests forged) shows it in them.
    """
    missing_fixture = pytest.mark.usefixtures("asyncodebench_missing_" + cfg["token"])
    functions = {"passed": sentinel_pass, "failed": sentinel_fail, "error": missing_fixture(sentinel_error),
                 "skipped": sentinel_skip}

    class Sentinels(object):
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, session, config, items):
            import pathlib
            path = pathlib.Path(cfg["folder"]) / ("test_%s.py" % cfg["token"])
            module = pytest.Module.from_parent(session, path=path)
            made = [pytest.Function.from_parent(module, name=sentinel_name(cfg["token"], outcome),
                                                callobj=functions[outcome]) for outcome in SENTINEL_OUTCOMES]
            real = len(items)
            for i, item in enumerate(made):  # spread: first, among, and last of the real tests
                items.insert(min(len(items), i * (real + i) // (len(made) - 1)), item)
    return Sentinels()


if __name__ == "__main__":
    main()
