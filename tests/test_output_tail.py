"""The end of the evaluator output that report.json keeps per prediction (report.output_tail): bounded in lines and
characters, plain text, and only where a run folder holds the file."""

from __future__ import annotations

from pathlib import Path

from asyncodebench.reports.report import OUTPUT_TAIL_CHARS, OUTPUT_TAIL_LINES, build_report, output_tail
from asyncodebench.reports.synthetic import synthetic_inputs, typed_results
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.runfolder import prediction_path


def test_a_long_output_keeps_its_last_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "evaluator_output.txt"
    path.write_text("".join(f"line {k} " + "x" * 20 + "\n" for k in range(500)))
    tail = output_tail(path)
    assert tail is not None and len(tail) <= OUTPUT_TAIL_CHARS
    lines = tail.split("\n")
    assert len(lines) == OUTPUT_TAIL_LINES and lines[-1].startswith("line 499 ") and lines[0].startswith("line 470 ")


def test_one_huge_line_is_cut_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "evaluator_output.txt"
    path.write_bytes(b"y" * 100_000)
    tail = output_tail(path)
    assert tail == "y" * OUTPUT_TAIL_CHARS


def test_colour_codes_and_control_characters_do_not_survive(tmp_path: Path) -> None:
    path = tmp_path / "evaluator_output.txt"
    path.write_bytes(b"\x1b[31mFAILED\x1b[0m tests/x.py\r\nbell\x07 and \xff\xfe bytes\tend\n")
    assert output_tail(path) == "FAILED tests/x.py\nbell\ufffd and \ufffd\ufffd bytes\tend"
    assert output_tail(tmp_path / "missing.txt") is None


def test_build_report_reads_the_tail_from_the_run_folder(tmp_path: Path) -> None:
    metadata, file, results = synthetic_inputs(tasks=2, points=2, models=("m1",), protocols=("single",),
                                               infrastructure_errors=1)
    first = results[0]
    folder = tmp_path / prediction_path(Prediction(first["line"], first["task_id"], first["protocol"],
                                                   first["model_name_or_path"], None, "", (), {}, {}))
    folder.mkdir(parents=True)
    (folder / "evaluator_output.txt").write_text("== 1 failed in 0.1s ==\n")
    typed = typed_results(results)
    report = build_report({**metadata, "run_folder": str(tmp_path)}, file, typed)  # schema-checked inside
    rows = report["predictions"]
    assert rows[0]["output_tail"] == "== 1 failed in 0.1s =="
    assert "output_tail" not in rows[1]  # an infrastructure error has no evaluator output
    assert "output_tail" not in build_report(metadata, file, typed)["predictions"][0]  # no run folder
