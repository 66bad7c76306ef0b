"""The scripts' exit codes are named once (`asyncodebench/cli.py`); a script stops with one by raising `cli.Exit`,
which its `main` (wrapped in `cli.entry_point`) turns into one `error: ...` line and the code."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from asyncodebench import cli

ROOT = Path(__file__).resolve().parent.parent


def test_the_codes_are_the_documented_ones() -> None:
    codes = (cli.EXIT_OK, cli.EXIT_PROBLEMS_FOUND, cli.EXIT_BAD_ARGUMENTS, cli.EXIT_INFRASTRUCTURE,
             cli.EXIT_INTERRUPTED, cli.EXIT_TERMINATED)
    assert codes == (0, 1, 2, 3, 130, 143)
    manual = " ".join((ROOT / "docs" / "evaluate.md").read_text(encoding="utf-8").split())
    table = re.search(r"Exit codes of `evaluate.py`: (.*?) Every script", manual).group(1)
    assert [int(c) for c in re.findall(r"(?:^|; )(\d+) ", table)] == list(codes)


def test_an_exit_becomes_its_message_and_code(capsys: pytest.CaptureFixture[str]) -> None:
    @cli.entry_point
    def main(argv: list[str] | None = None) -> int:
        if argv == ["fail"]:
            raise cli.Exit(cli.EXIT_INFRASTRUCTURE, "the daemon is not running")
        if argv == ["quiet"]:
            raise cli.Exit(cli.EXIT_PROBLEMS_FOUND)
        return cli.EXIT_OK

    assert main([]) == 0 and capsys.readouterr().err == ""
    assert main(["fail"]) == 3 and capsys.readouterr().err == "error: the daemon is not running\n"
    assert main(["quiet"]) == 1 and capsys.readouterr().err == ""
    assert main.__name__ == "main"


def test_loading_rows_from_no_such_folder_is_a_bad_argument(tmp_path: Path) -> None:
    with pytest.raises(cli.Exit) as stop:
        cli.load_rows(str(tmp_path / "missing"), None)
    assert stop.value.code == cli.EXIT_BAD_ARGUMENTS and "missing" in stop.value.message
    with pytest.raises(cli.Exit) as stop:
        cli.task(str(tmp_path / "missing"), None, "asyncodebench:nope", None)
    assert stop.value.code == cli.EXIT_BAD_ARGUMENTS


def test_the_limit_flags_make_the_settings() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    cli.add_limit_arguments(parser)
    settings = cli.settings(parser.parse_args(["--timeout", "20", "--memory", "1024m", "--pids", "64"]), False)
    assert (settings.timeout, settings.probe_timeout, settings.run_probes) == (20, 60, False)
    assert (settings.limits.memory, settings.limits.cpus, settings.limits.pids) == ("1g", 1.0, 64)


def test_the_resume_command_is_the_whole_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    argv = ["my preds.jsonl", "--dataset", "./published", "--max-workers", "2", "--force", "--timeout", "20"]
    command = cli.resume_command(str(ROOT / "scripts" / "evaluate.py"), argv, "3f2a9c1d0b7e")
    words = shlex.split(command)
    # This interpreter (a bare `python` may lack the kit), the script as seen from here, every flag but --force
    # (it would redo the finished work), and the generated run id.
    assert Path(words[0]).samefile(sys.executable) and words[1] == "scripts/evaluate.py"
    assert words[2:] == ["my preds.jsonl", "--dataset", "./published", "--max-workers", "2", "--timeout", "20",
                         "--run-id", "3f2a9c1d0b7e"]
    given = ["p.jsonl", "--run-id=try1"]
    assert shlex.split(cli.resume_command("scripts/evaluate.py", given, "try1"))[1:] == ["scripts/evaluate.py", *given]
