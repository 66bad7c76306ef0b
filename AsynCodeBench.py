"""Builder of the AsynCodeBench v0.4.2 dataset: three configurations, one `test` split each.

A local build tool, not a Hub loading script (datasets >= 4 no longer runs those; the Hub gets Parquet). Use it
directly:

    from AsynCodeBench import AsynCodeBench
    builder = AsynCodeBench(config_name="tasks")
    builder.download_and_prepare()
    tasks = builder.as_dataset(split="test")

or run it to export the Parquet files and the card's YAML (`python AsynCodeBench.py`), or to check that a fresh
build is byte-identical to the committed files (`python AsynCodeBench.py --check`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import datasets

from asyncodebench.dataset.build import CITATION, DESCRIPTION, HOMEPAGE, build_release
from asyncodebench.dataset.features import CONFIG_DESCRIPTIONS, FEATURES
from asyncodebench.dataset.validation import ID_FIELDS

SOURCES = Path(__file__).resolve().parent / "data"
VERSION = datasets.Version("0.4.2")


@dataclass
class AsynCodeBenchConfig(datasets.BuilderConfig):
    """One configuration (`tasks`, `scenarios` or `dependencies`), read from the sources in `sources_dir`."""

    sources_dir: str = str(SOURCES)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.name not in FEATURES:
            raise ValueError(f"unknown configuration {self.name!r}; choose one of {sorted(FEATURES)}")


class AsynCodeBench(datasets.GeneratorBasedBuilder):
    """AsynCodeBench: coding agents under five execution protocols, with producer-consumer dependency probes."""

    VERSION = VERSION
    BUILDER_CONFIG_CLASS = AsynCodeBenchConfig
    BUILDER_CONFIGS = [
        AsynCodeBenchConfig(name=name, version=VERSION, description=text) for name, text in CONFIG_DESCRIPTIONS.items()
    ]
    DEFAULT_CONFIG_NAME = "tasks"

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=DESCRIPTION,
            features=FEATURES[self.config.name],
            homepage=HOMEPAGE,
            license="apache-2.0",
            citation=CITATION,
        )

    def _split_generators(self, dl_manager: datasets.DownloadManager) -> list[datasets.SplitGenerator]:
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"sources_dir": self.config.sources_dir})]

    def _generate_examples(self, sources_dir: str):
        rows = build_release(Path(sources_dir)).by_config()[self.config.name]
        id_field = ID_FIELDS[self.config.name]
        for row in rows:
            yield row[id_field], row


if __name__ == "__main__":
    from asyncodebench.dataset.export import main

    main(AsynCodeBench)
