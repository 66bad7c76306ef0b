"""A retry's warning gives the daemon's whole reason: its cause is often at the end of a long message."""

from __future__ import annotations

import pytest

from asyncodebench.run.work import TRIES, say_retry


def test_a_retry_warning_keeps_the_end_of_a_long_daemon_reason(capsys: pytest.CaptureFixture[str]) -> None:
    reason = ("500 Server Error for http+docker://localhost/v1.43/containers/abc/start: Internal Server Error "
              "(\"failed to create task for container: failed to create shim task: OCI runtime create failed: "
              + "runc create failed: unable to start container process: " * 6
              + "error during container init:\n   no space left on device\")")
    assert len(reason) > 300
    say_retry("line 4 (asyncodebench:minicache)", [reason])
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [f"warning: line 4 (asyncodebench:minicache): {' '.join(reason.split())}; trying again "
                    f"(attempt 2 of {TRIES})"]
    assert "no space left on device\")" in said[0]
