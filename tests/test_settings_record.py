"""`Settings.to_record` / `Settings.from_record`: the one conversion between the evaluation settings and the record a
run folder keeps (`settings.json`) and the report shows (`run.settings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asyncodebench.harness.evaluation import Settings
from asyncodebench.harness.sandbox import Limits
from asyncodebench.run.runfolder import SETTINGS, differences, read_settings, settings_record, write_settings

# settings.json as the code before `to_record` wrote it, for the settings of `test_settings_json_is_unchanged`.
SETTINGS_JSON = """{
  "version": 1,
  "dataset": {
    "source": "hub",
    "id": "PhilipZhang/AsynCodeBench",
    "revision": "v0.4.2",
    "resolved_commit": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    "content_sha256": null
  },
  "mapped_images": {
    "asyncodebench:x": "127.0.0.1:5000/x@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
  },
  "run_probes": false,
  "timeout_seconds": 20,
  "probe_timeout_seconds": 10,
  "limits": {
    "memory": "1g",
    "cpus": 0.5,
    "pids": 256,
    "file_size_bytes": 1073741824,
    "workspace": "4g",
    "tmp": "1g",
    "io": "512m",
    "inodes": 1000000,
    "build_space": "4g"
  },
  "build_timeout_seconds": null
}
"""
HUB = {"source": "hub", "id": "PhilipZhang/AsynCodeBench", "revision": "v0.4.2", "resolved_commit": "b" * 40,
       "content_sha256": None}


class Published:
    """What `settings_record` reads of the published rows: their description."""

    def __init__(self, description: dict[str, Any]) -> None:
        self.description = description

    def describe(self) -> dict[str, Any]:
        return self.description


@pytest.mark.parametrize("settings", [
    Settings(),
    Settings(20, 10, False, Limits("1g", 0.5, 256)),
    Settings(900, 60, True, Limits("512m", 2.0, 32, 1 << 20, "1g", "64m", "32m", 1000)),
    Settings(900, 60, True, Limits(build_space="8g"), build_timeout=120),
])
def test_a_record_reads_back_as_the_same_settings(settings: Settings) -> None:
    record = settings.to_record()
    assert list(record) == ["run_probes", "timeout_seconds", "probe_timeout_seconds", "limits", "build_timeout_seconds"]
    assert Settings.from_record(record) == settings


def test_a_report_record_and_an_older_record_read_back() -> None:
    """The report adds its own keys beside the settings; a record made before a limit existed takes its default."""
    settings = Settings(30, 5, True, Limits("2g", 1.5, 128))
    report = {**settings.to_record(), "max_workers": 3, "default_protocol": None, "tasks": [], "mode": "evaluate"}
    assert Settings.from_record(report) == settings
    older = settings.to_record()
    del older["limits"]["inodes"]
    del older["limits"]["build_space"], older["build_timeout_seconds"]
    assert Settings.from_record(older).limits.inodes == Limits().inodes
    assert Settings.from_record(older).build_timeout is None


def test_settings_json_is_unchanged(tmp_path: Path) -> None:
    settings = Settings(20, 10, False, Limits("1g", 0.5, 256))
    mapped = {"asyncodebench:x": "127.0.0.1:5000/x@sha256:" + "c" * 64}
    write_settings(tmp_path, settings_record(Published(HUB), settings, mapped))
    assert (tmp_path / SETTINGS).read_text(encoding="utf-8") == SETTINGS_JSON
    recorded = read_settings(tmp_path)
    assert Settings.from_record(recorded) == settings
    assert differences(recorded, settings_record(Published(HUB), settings, mapped)) == []


def test_a_resume_with_another_build_limit_is_refused_and_an_older_record_resumes() -> None:
    recorded = settings_record(Published(HUB), Settings(20, 10, False, Limits("1g", 0.5, 256)), {})
    again = settings_record(Published(HUB), Settings(20, 10, False, Limits("1g", 0.5, 256)), {})
    assert differences(recorded, again) == []
    longer = settings_record(Published(HUB), Settings(20, 10, False, Limits("1g", 0.5, 256), build_timeout=60), {})
    assert differences(recorded, longer) == ["--build-timeout: was the task default, now 60"]
    roomier = settings_record(Published(HUB), Settings(20, 10, False, Limits("1g", 0.5, 256, build_space="8g")), {})
    assert differences(recorded, roomier) == ["limit build_space: was 4g, now 8g"]
    older = {**recorded, "limits": {k: v for k, v in recorded["limits"].items() if k != "build_space"}}
    del older["build_timeout_seconds"]
    assert differences(older, again) == []  # a run folder made before native builds resumes
