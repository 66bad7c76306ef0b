"""Whether a process of evaluated code runs once more, and under which wall-clock limit (METRICS decisions 15, 16).

A loaded machine can slow an honest process past its limit, or blur its evidence; neither may become the model's
verdict on one run. Such a process runs once more, in a fresh container: with its limit doubled after a timeout
(decision 16), with the same limit when only its evidence was ambiguous (decision 15). The second run's result
counts, whatever it is: a process that does not end under twice its limit has timed out, a model outcome. Only the
wall clock decides; CPU time never does (a sleeping process looks starved, and the model controls that).
"""

from __future__ import annotations

TRIES = 2  # runs of one process at most: the first, and one more when load may have decided it
TIMEOUT_LIMIT_FACTOR = 2  # the retry's limit after a timeout, in multiples of the first


def next_limit(limit: int, timed_out: bool, ambiguous: bool = False, retry_timeout: bool = True) -> int | None:
    """The wall-clock limit (seconds) of the next run of a process that ran under `limit`, or None when its run
    stands. `retry_timeout` False: a timeout is already followed by other runs (a probe batch, whose selectors then
    run alone), so only ambiguity calls for a retry."""
    if timed_out and retry_timeout:
        return limit * TIMEOUT_LIMIT_FACTOR
    if ambiguous:
        return limit
    return None
