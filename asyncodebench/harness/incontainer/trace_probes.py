"""Run probe tests under a line tracer and write which lines of the watched files their tests executed.

Started by root, `python -I <io>/trace_probes.py <io>/trace.json <out>/trace-result.json <pytest args...>`; it
becomes the unprivileged sandbox user first (the tests run the task's code), then runs pytest in this process with
a plugin that traces each test item (setup, call, teardown), threads included. Module bodies are not counted: an
import is not a test exercising a file. Standard library and the image's pytest only, Python >= 3.6.
"""

import json
import os
import sys
import threading

import pytest  # the image's, imported before the work tree is on sys.path


def main():
    """Run pytest on the arguments after the two paths; write {file: [lines]} relative to the work tree."""
    with open(sys.argv[1]) as handle:
        cfg = json.load(handle)
    os.setgroups([])
    os.setgid(cfg["sandbox_gid"])
    os.setuid(cfg["sandbox_uid"])
    os.environ.update({"HOME": cfg["home"], "TMPDIR": "/tmp", "PYTHONPATH": cfg["pythonpath"]})
    os.makedirs(cfg["home"], exist_ok=True)
    workdir = cfg["workdir"]
    os.chdir(workdir)
    sys.path[:0] = [p for p in cfg["pythonpath"].split(os.pathsep) if p] + [workdir]
    recorder = Recorder(workdir, cfg["watched"])
    status = pytest.main(sys.argv[3:], plugins=[recorder])
    with open(sys.argv[2], "w") as handle:
        json.dump({"exit_code": int(status), "lines": {f: sorted(v) for f, v in recorder.lines.items()}}, handle)


class Recorder:
    """A pytest plugin: line events of the watched files while each test item runs."""

    def __init__(self, workdir, watched):
        self.prefix = workdir.rstrip("/") + "/"
        self.watched = tuple(w.rstrip("/") for w in watched)
        self.lines = {}
        self._known = {}

    def _relative(self, filename):
        if filename not in self._known:
            rel = filename[len(self.prefix):] if filename.startswith(self.prefix) else None
            ok = rel is not None and any(rel == w or rel.startswith(w + "/") for w in self.watched)
            self._known[filename] = rel if ok else None
        return self._known[filename]

    def _call(self, frame, event, arg):
        if event != "call" or frame.f_code.co_name == "<module>":
            return None
        rel = self._relative(frame.f_code.co_filename)
        if rel is None:
            return None
        seen = self.lines.setdefault(rel, set())

        def local(frame, event, arg):
            if event == "line":
                seen.add(frame.f_lineno)
            return local
        seen.add(frame.f_code.co_firstlineno)
        return local

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """Trace while the item runs: its setup, call and teardown."""
        sys.settrace(self._call)
        threading.settrace(self._call)
        try:
            yield
        finally:
            sys.settrace(None)
            threading.settrace(None)


if __name__ == "__main__":
    main()
