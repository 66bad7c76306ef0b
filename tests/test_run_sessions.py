"""The run folder's session record: begun at each start, completed at each end, dropped by --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncodebench.reports.report import sessions_text
from asyncodebench.run import sessions


def test_sessions_are_recorded_in_order_and_completed(tmp_path: Path) -> None:
    sessions.begin(tmp_path, "2026-01-01T00:00:00+00:00", "evaluate")
    sessions.end(tmp_path, "2026-01-01T00:05:00+00:00", "interrupted", 2)
    sessions.begin(tmp_path, "2026-01-01T01:00:00+00:00", "evaluate")
    every = sessions.end(tmp_path, "2026-01-01T01:09:00+00:00", "finished", 4)
    assert [(s.started_at[11:16], s.ended, s.evaluated) for s in every] == [("00:00", "interrupted", 2),
                                                                              ("01:00", "finished", 4)]
    assert sessions.read(tmp_path) == every
    text = sessions_text({"sessions": [vars(s) for s in every]})
    assert text.startswith(", in 2 sessions (") and "2 evaluated, interrupted" in text and "4 evaluated)" in text
    sessions.forget(tmp_path)
    assert sessions.read(tmp_path) == []


def test_one_session_adds_nothing_to_the_report_line() -> None:
    assert sessions_text({"sessions": [{"started_at": "a", "finished_at": "b", "evaluated": 1}]}) == ""
    assert sessions_text({}) == ""  # a report from before the record


def test_a_damaged_record_says_what_to_do_and_does_not_stop_the_next_session(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / sessions.SESSIONS).write_text("[{")
    with pytest.raises(ValueError, match="delete it"):
        sessions.read(tmp_path)
    sessions.begin(tmp_path, "2026-01-01T00:00:00+00:00", "evaluate")
    assert "sessions.json.damaged" in capsys.readouterr().err
    assert (tmp_path / "sessions.json.damaged").read_text() == "[{"
    assert [s.started_at for s in sessions.read(tmp_path)] == ["2026-01-01T00:00:00+00:00"]
