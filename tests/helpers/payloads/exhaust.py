"""Hostile predictions that exhaust what their container gives them (class 10): a prediction must never make itself
an infrastructure error (METRICS decision 10) by filling a writable mount, its inodes, the process limit or the
container's memory, after pytest wrote its report, while the tests run, or in the probes only.

The evaluated code may write its work tree, its /tmp, /dev/shm and its output folder. Before issue 27 the output
folder shared a tmpfs with the harness's own records: filling it after the report kept the container's init from
writing its "all ended" marker, three attempts failed and the prediction became an infrastructure error, kept out of
every mean. Each payload here is scored as the model outcome it is: the report pytest wrote before the fill counts as
it is, and one lost with a container the OOM killer emptied is missing (scored 0).

`exhaust_code` is also used by tests/test_exhaustion.py, on smaller limits, for every mount and kind.
"""

from __future__ import annotations

from helpers.payloads.hostile import API, CORE, PatchMaker, Payload, _appended, _checkpoint, _line

EXHAUST_ATTACK_CLASS = 10
OUTPUT = "/asyncodebench/out"
WRITABLE = {"work tree": "/testbed", "tmp": "/tmp", "output": OUTPUT, "shm": "/dev/shm"}
IN_EVALUATOR = "'addopts=' in _s.argv"  # the evaluator's pytest gets the task's `-o addopts=`; probes do not
IN_PROBES = "'addopts=' not in _s.argv"
EVERYWHERE = "True"

# Fills each (folder, kind) in turn: "space" writes 1 MiB blocks of non-zero bytes until a write fails, "inodes"
# makes empty files until one cannot be made, "memory" writes the work tree until the kernel stops it (a tmpfs is
# counted in the container's memory), "pids" forks until the process limit holds and keeps every slot. Each
# fill stops at its first error and says so on stdout; the files stay.
EXHAUST = '''
import atexit as _a, os as _o, sys as _s


def _exhaust(_targets=EXHAUST_TARGETS):  # bound now: another block of this code may follow in the module
    for _folder, _kind in _targets:
        if _kind == "pids":
            if _o.fork() == 0:
                _o.closerange(0, 256)  # holds no pipe of the command it left (nothing waits for it to close)
                _o.setsid()
                while True:
                    try:
                        _o.fork()
                    except OSError:
                        __import__("time").sleep(0.5)
            continue
        _made = 0
        try:
            if _kind == "inodes":
                while True:
                    _o.close(_o.open("%s/.exhaust-%d-%d" % (_folder, _o.getpid(), _made), _o.O_CREAT | _o.O_WRONLY))
                    _made += 1
            _block = bytes(range(1, 256)) * 4112
            with open("%s/.exhaust-%d" % (_folder, _o.getpid()), "wb") as _h:
                while True:
                    _h.write(_block)
                    _h.flush()
                    _made += 1
        except OSError as _e:
            print("EXHAUSTED %s %s after %d: %s" % (_kind, _folder, _made, _e), flush=True)


if EXHAUST_WHERE:
    if EXHAUST_AFTER_REPORT:
        _a.register(_exhaust)  # after pytest wrote its report and gave back the real stdout
    else:
        _exhaust()  # while the tests are collected, before any of them ran
'''


def exhaust_code(targets: list[tuple[str, str]], after_report: bool, where: str = EVERYWHERE) -> str:
    """Code for a module of the tree that exhausts each (folder, kind) in the pytest processes `where` names,
    after the report or at import (while the tests are collected). Kinds: space, inodes, memory, pids."""
    targets = [(folder if kind != "memory" else WRITABLE["work tree"], "space" if kind == "memory" else kind)
               for folder, kind in targets]
    return (f"EXHAUST_TARGETS = {targets!r}\nEXHAUST_AFTER_REPORT = {after_report!r}\n"
            + EXHAUST.replace("EXHAUST_WHERE", where))


def exhaust_payloads(make: PatchMaker) -> list[Payload]:
    """Every mount the evaluated code may write, its inodes, the process limit and the memory, exhausted after the
    report, during the tests and in the probes only; in final patches, a checkpoint state and an agent's patch."""
    d = make.diff
    output = [(OUTPUT, "space"), (OUTPUT, "inodes")]
    small = [(WRITABLE["shm"], "space"), *output]  # /dev/shm's inodes are bounded by memory alone

    def final(name: str, code: str) -> Payload:
        return Payload(name, EXHAUST_ATTACK_CLASS, "final", _line(name, d(_appended(CORE, code))))

    found = [
        final("exhaust-output-after-the-report", exhaust_code(output, True, IN_EVALUATOR)),
        final("exhaust-small-mounts-after-the-report", exhaust_code(small, True, IN_EVALUATOR)),
        final("exhaust-memory-after-the-report", exhaust_code([("", "memory")], True, IN_EVALUATOR)),
        final("exhaust-output-during-the-tests", exhaust_code(output, False, EVERYWHERE)),
        final("exhaust-output-and-pids-in-the-probes", exhaust_code([*output, ("", "pids")], True, IN_PROBES)),
    ]
    state = d(_appended(CORE, exhaust_code(output, True, EVERYWHERE)))
    found.append(Payload("checkpoint-exhausts-output", EXHAUST_ATTACK_CLASS, "checkpoint", _line(
        "checkpoint-exhausts-output", "", protocol="async_private", checkpoints=[
            _checkpoint("agent_artifact", "agent_workspace", "core_agent", state),
            _checkpoint("final_integrated", "integrated_workspace", None, "")])))
    found.append(Payload("agents-exhaust-output", EXHAUST_ATTACK_CLASS, "agents", _line(
        "agents-exhaust-output", None, protocol="async_private",
        agent_patches={"api_agent": d(_appended(API, exhaust_code(output, True, EVERYWHERE)))})))
    return found


EXHAUST_PAYLOADS = ("exhaust-output-after-the-report", "exhaust-small-mounts-after-the-report",
                    "exhaust-memory-after-the-report", "exhaust-output-during-the-tests",
                    "exhaust-output-and-pids-in-the-probes", "checkpoint-exhausts-output", "agents-exhaust-output")
