"""Prediction lines for the demo task: the committed examples, single ones made here, JSONL files, non-UTF-8 bytes."""

from __future__ import annotations

import json
from typing import Any

from helpers.checkout import DEMO_TASK_ID, EXAMPLES

# Patches whose bytes are not UTF-8: a Latin-1 file given as raw bytes in the JSONL line, and one given as the JSON
# escape `\udce9` (how Python's surrogateescape writes such bytes).
LATIN1_PATCH = (
    b"diff --git a/minicache/latin1.txt b/minicache/latin1.txt\nnew file mode 100644\n"
    b"--- /dev/null\n+++ b/minicache/latin1.txt\n@@ -0,0 +1 @@\n+caf\xe9 cr\xe8me\n"
)


def example_predictions() -> dict[str, dict[str, Any]]:
    """The demo's example predictions by model name (gold, empty, partial, syntax error, 11 hostile ones)."""
    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    return {row["model_name_or_path"]: row for row in rows}


def prediction(model: str, patch: str | None, **extra: Any) -> dict[str, Any]:
    return {"task_id": DEMO_TASK_ID, "model_name_or_path": model, "protocol": "single", "model_patch": patch, **extra}


def jsonl(predictions: list[dict[str, Any] | bytes]) -> bytes:
    """A predictions file: dicts become JSON lines, bytes are written as given (for malformed or raw lines)."""
    return b"".join((p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n" for p in predictions)


def latin1_raw_line(model: str) -> bytes:
    """A JSONL line whose patch carries the bytes 0xE9 and 0xE8 raw (not valid UTF-8, as some tools write)."""
    line = json.dumps(prediction(model, "PATCH_HERE")).encode()
    escaped = LATIN1_PATCH.replace(b"\n", b"\\n")
    return line.replace(b"PATCH_HERE", escaped)


def latin1_escaped_line(model: str) -> bytes:
    """The same patch with the bytes as `\\udce9`-style escapes (json.dumps of a surrogate-escaped string)."""
    return json.dumps(prediction(model, LATIN1_PATCH.decode("utf-8", "surrogateescape"))).encode()
