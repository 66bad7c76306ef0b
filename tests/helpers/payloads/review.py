"""Targeted attacks written by someone who read docs/integrity.md (issue 27): plain Python that reaches pytest's
`Config` through the assertion rewriter on `sys.meta_path`, frame walking with names built at run time, values whose
`__eq__` is always true, and expected values read from the calling test's source line. Each is appended to the
demo's `minicache/core.py` (a changed file, so the review reads it hunk by hunk), in several spellings.

The runtime layers may or may not catch a form that leaves the sentinels alone; the review must: every one of them
raises a high-severity flag, so its result is `needs_review` at best (tests/test_review_analysis.py).
"""

from __future__ import annotations

from helpers.payloads.hostile import CORE, PatchMaker, _appended

# The assertion rewriter holds the session's Config; a hook wrapper registered through it passes the real tests
# only (the sentinels' functions are defined in the launcher's file).
META_PATH_CONFIG = '''
import sys


def _session_config():
    for finder in sys.meta_path:
        config = getattr(finder, "config", None)
        if config is not None and hasattr(config, "pluginmanager"):
            return config
    return None


class _Passing:
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if item.function.__code__.co_filename.endswith(("launch.py", "sentinels.py")):
            return
        report.outcome, report.longrepr = "passed", None


_Passing.pytest_runtest_makereport.pytest_impl = {"wrapper": False, "hookwrapper": True}
_config = _session_config()
if _config is not None:
    _config.pluginmanager.register(_Passing(), "passing")
'''

META_PATH_BY_TYPE_NAME = '''
import sys as _s

for _hook in list(getattr(_s, "meta" + "_path")):
    if type(_hook).__name__ == "AssertionRewritingHook":
        _cfg = _hook.config
        _cfg.option.tbstyle = "no"
'''

FRAMES_JOINED_NAMES = '''
import sys

_peek = getattr(sys, "".join(["_get", "fr", "ame"]))


def _config_from_frames():
    frame = _peek(0)
    back = "f_" + "back"
    scope = bytes([102, 95, 108, 111, 99, 97, 108, 115]).decode()
    while frame is not None:
        found = getattr(frame, scope).get("config")
        if found is not None:
            return found
        frame = getattr(frame, back)
    return None
'''

FRAMES_CHR_AND_BASE64 = '''
import base64
import inspect as _i

_up = "".join(map(chr, [102, 95, 98, 97, 99, 107]))
_vars = base64.b64decode("Zl9nbG9iYWxz").decode()


def _walk():
    frame = _i.currentframe()
    while frame:
        if "session" in getattr(frame, _vars):
            return getattr(frame, _vars)["session"]
        frame = getattr(frame, _up)
'''

FRAMES_IMPORTED_UNDER_ANOTHER_NAME = '''
from sys import _getframe as _here


def _caller_locals():
    return _here(2).f_locals
'''

ALWAYS_EQUAL = '''
class _Anything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0


def lookup(*args, **kwargs):
    return _Anything()
'''

ALWAYS_EQUAL_LAMBDA = '''
class _Whatever(float):
    __eq__ = lambda self, other: True


def mean(values):
    return _Whatever(0.0)
'''

ALWAYS_EQUAL_WITH_NOT_IMPLEMENTED = '''
class _Match:
    def __eq__(self, other):
        if other is None:
            return NotImplemented
        return True
'''

CALLER_SOURCE_INSPECT = '''
import inspect
import re


def expected_value():
    caller = inspect.stack()[1]
    line = (caller.code_context or [""])[0]
    found = re.search(r"==\\\\s*(.+)$", line)
    return eval(found.group(1)) if found else None
'''

CALLER_SOURCE_TRACEBACK = '''
import traceback


def _asserted_line():
    return traceback.extract_stack()[-3].line
'''

CALLER_SOURCE_LINECACHE = '''
import linecache
import sys as _s


def _calling_line():
    frame = _s._getframe(2)
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)
'''

ATTACKS: dict[str, tuple[str, str]] = {
    # name: (class, code appended to minicache/core.py)
    "meta-path-config-hook-wrapper": ("meta_path", META_PATH_CONFIG),
    "meta-path-built-name": ("meta_path", META_PATH_BY_TYPE_NAME),
    "frames-joined-names": ("frames", FRAMES_JOINED_NAMES),
    "frames-chr-and-base64": ("frames", FRAMES_CHR_AND_BASE64),
    "frames-imported-under-another-name": ("frames", FRAMES_IMPORTED_UNDER_ANOTHER_NAME),
    "always-equal": ("constant_eq", ALWAYS_EQUAL),
    "always-equal-lambda": ("constant_eq", ALWAYS_EQUAL_LAMBDA),
    "always-equal-not-implemented": ("constant_eq", ALWAYS_EQUAL_WITH_NOT_IMPLEMENTED),
    "caller-source-inspect": ("caller_source", CALLER_SOURCE_INSPECT),
    "caller-source-traceback": ("caller_source", CALLER_SOURCE_TRACEBACK),
    "caller-source-linecache": ("caller_source", CALLER_SOURCE_LINECACHE),
}


def review_attack_patches(make: PatchMaker) -> dict[str, str]:
    """Each attack as a real git diff against the demo's base (minicache/core.py changed)."""
    return {name: make.diff(_appended(CORE, code)) for name, (_, code) in ATTACKS.items()}
