"""Waiting for a condition to hold, with a deadline."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(condition: Callable[[], Any], seconds: float) -> bool:
    """Poll `condition` every 0.1 s until it holds (True) or `seconds` have passed (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
