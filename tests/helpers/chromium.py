"""Debian's Chromium, headless through Playwright (which cannot download a browser of its own here)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# What a CI machine can run: no sandbox as root, no GPU, and nothing that phones home on start.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextmanager
def headless_chromium() -> Iterator[Any]:
    """A launched browser; missing Chromium or Playwright fails the test, never skips it. Playwright's sync API
    allows one of these at a time in a process, so the suite shares one (tests/conftest.py's `browser`)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` "
                    "(scripts/setup_machine.sh does)", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: run scripts/install_python_env.sh (test extras)", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
