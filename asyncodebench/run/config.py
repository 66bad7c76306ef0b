"""What a run is asked to do (`RunConfig`, filled in by the CLI) and what it found and did (`RunState`, handed to
the executors and the report)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from asyncodebench.dataset.rows import PublishedRows
from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.evaluation import Settings
from asyncodebench.harness.overlays import OverlaySource
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.digests import ImageStatus
from asyncodebench.run.predictions import PredictionFile
from asyncodebench.run.runfolder import container_key


@dataclass(frozen=True)
class MonitorSettings:
    """The optional monitor model (`agents.monitor`): asked after the run, so not part of the settings record that
    decides whether a run folder resumes."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    which: Literal["flagged", "all"] = "flagged"
    retry_seconds: float = 600.0  # of one failing call, before the verdict is recorded as unreachable


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs; the CLI only fills this in."""

    predictions: Path
    dataset: str
    revision: str | None
    run_id: str
    output_dir: Path
    max_workers: int | None = None  # predictions at once (None: 1 locally; on Ray, as many as the cluster fits)
    executor: str = "local"  # local | ray: where predictions are evaluated (executors.py); results are the same
    ray_address: str | None = None  # the Ray cluster to use (None: $RAY_ADDRESS, else the one started here)
    ray_resources: tuple[tuple[str, float], ...] = ()  # extra custom resources every Ray task asks for
    tasks: tuple[str, ...] = ()
    default_protocol: str | None = None
    force: bool = False
    rescore: bool = False
    pull: bool = False
    overlays_dir: Path | None = None  # a checkout of the upstream repository: overlays read offline from it
    overlays_url: str | None = None  # else fetched from here (None: $ASYNCODEBENCH_OVERLAYS_URL or upstream)
    images: Path | None = None  # an image map: rebuilt images to run instead of the rows' official ones
    settings: Settings = field(default_factory=Settings)
    monitor: MonitorSettings | None = None  # a monitor model reads the flagged results after the run

    @property
    def run_dir(self) -> Path:
        """The run folder: `<output_dir>/<run_id>`."""
        return self.output_dir / self.run_id

    @property
    def label(self) -> str:
        """The key of this run folder's containers and volumes (label value, name part): never shared with a run of
        the same id in another output folder. `run_id` stays the id users see."""
        return container_key(self.run_dir, self.run_id)

    @property
    def overlay_source(self) -> OverlaySource:
        """Where the run takes overlays from, as its flags say."""
        return OverlaySource(directory=self.overlays_dir, url=self.overlays_url)


@dataclass
class RunState:
    """What a run found and did, handed to the report."""

    published: PublishedRows
    specs: dict[str, TaskSpec]
    file: PredictionFile
    images: dict[str, ImageStatus]
    started_at: str
    baselines: dict[str, BaseStateRecord | str] = field(default_factory=dict)  # record, or why it could not run
    mapped_images: dict[str, dict[str, Any]] = field(default_factory=dict)  # the --images entries, by task
    evaluated_now: int = 0
    skipped_finished: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)  # set on Ctrl-C: record nothing more
