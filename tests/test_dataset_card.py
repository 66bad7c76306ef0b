"""The dataset card as the Hub shows it, without the kit: sizes equal to what `datasets` reports, the address of every
source, the sections of the Hub's card template, and a BibTeX entry that agrees with CITATION.cff.

Only the part of the card above "## Evaluate" is checked for sources and sections: that is the dataset's side of the
card; the harness documentation below it has tests of its own.
"""

from __future__ import annotations

import datetime
import re
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from AsynCodeBench import AsynCodeBench
from asyncodebench.dataset.build import CITATION, HOMEPAGE
from asyncodebench.dataset.citation import bibtex, read_cff
from asyncodebench.dataset.export import PARQUET_NAME, split_front_matter
from asyncodebench.dataset.features import FEATURES
from asyncodebench.dataset.notices import OVERLAY_REPOSITORY
from asyncodebench.dataset.publish import hub_files

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "README.md"
TEMPLATE_HEADINGS = (  # the Hub's dataset card template, as this card names its sections
    "## Dataset sources", "## Uses", "### Direct use", "### Out-of-scope use", "## Configurations",
    "## Dataset creation", "### Curation rationale", "### Source data", "### Personal and sensitive information",
    "## Bias, risks and limitations", "### Recommendations", "## How to cite", "## Contact",
)
URL = re.compile(r"https?://[^\s<>(){}\]`\"']+")
KIT_FOLDERS = ("asyncodebench/", "data/", "schemas/", "scripts/", "tests/")


@cache
def card_text() -> str:
    return CARD.read_text(encoding="utf-8")


def dataset_part() -> str:
    """The card's body above the harness documentation."""
    _, body = split_front_matter(card_text())
    return body.split("\n## Evaluate\n", 1)[0]


def section(heading: str) -> str:
    """The text under `heading` (a level-2 heading, without `## `), up to the next level-2 heading."""
    parts = re.split(r"^## ", dataset_part(), flags=re.MULTILINE)
    matching = [p for p in parts if p.startswith(heading + "\n")]
    assert len(matching) == 1, f"the card needs exactly one '## {heading}' section above '## Evaluate'"
    return matching[0]


def card_bibtex() -> str:
    blocks = re.findall(r"```bibtex\n(.*?)```", section("How to cite"), re.DOTALL)
    assert len(blocks) == 1, "the citation section needs exactly one ```bibtex block"
    return blocks[0].strip()


def task_rows() -> list[dict[str, Any]]:
    return pq.read_table(ROOT / "data" / "tasks" / PARQUET_NAME).to_pylist()


def recorded_addresses() -> set[str]:
    """Every web address the release records: the Hub repository, the upstream harness, the task sources."""
    rows = task_rows()
    return {HOMEPAGE, OVERLAY_REPOSITORY} | {r["repository_url"] for r in rows} | {
        r["pull_request_url"] for r in rows if r["pull_request_url"]
    }


def heading_anchor(heading: str) -> str:
    """The anchor the Hub (and GitHub) give a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# --- sizes (dataset_info) --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each committed Parquet file loaded the way `load_dataset` loads the Hub's files; the info it records."""
    import datasets

    cache_dir = tmp_path_factory.mktemp("parquet-cache")
    return {
        config: datasets.load_dataset(
            "parquet", data_files={"test": str(ROOT / "data" / config / PARQUET_NAME)}, split="test",
            cache_dir=str(cache_dir),
        ).info
        for config in FEATURES
    }


def card_infos() -> dict[str, dict[str, Any]]:
    meta, _ = split_front_matter(card_text())
    return {info["config_name"]: info for info in meta["dataset_info"]}


def test_card_num_bytes_and_dataset_size_are_the_arrow_sizes_datasets_reports(loaded: dict[str, Any]) -> None:
    for config, info in loaded.items():
        card = card_infos()[config]
        assert card["splits"] == [
            {"name": "test", "num_bytes": info.splits["test"].num_bytes,
             "num_examples": info.splits["test"].num_examples}
        ], config
        assert card["dataset_size"] == info.dataset_size, config


def test_card_download_size_is_the_size_of_the_parquet_file(loaded: dict[str, Any]) -> None:
    for config, info in loaded.items():
        size = (ROOT / "data" / config / PARQUET_NAME).stat().st_size
        assert card_infos()[config]["download_size"] == size == info.download_size, config


def test_in_memory_size_is_not_the_file_size() -> None:
    """The old card gave the Parquet size for all three numbers; Arrow in memory is larger for every config."""
    for config, card in card_infos().items():
        assert card["dataset_size"] > card["download_size"], config


# --- sources, sections, addresses ------------------------------------------------------------------------


def test_card_has_the_sections_of_the_hub_card_template_above_evaluate() -> None:
    lines = dataset_part().splitlines()
    missing = [h for h in TEMPLATE_HEADINGS if h not in lines]
    assert not missing, f"add these sections above '## Evaluate': {missing}"


def test_sources_name_the_hub_repository_the_upstream_harness_and_every_task_source() -> None:
    sources = section("Dataset sources")
    assert HOMEPAGE in sources and OVERLAY_REPOSITORY in sources
    for row in task_rows():
        assert row["repository_url"] in sources, row["task_id"]
        if row["pull_request_url"]:
            assert row["pull_request_url"] in sources, row["task_id"]


def test_sources_list_exactly_the_files_the_hub_repository_holds() -> None:
    sources = section("Dataset sources")
    for path in hub_files():
        shown = f"data/<config>/{PARQUET_NAME}" if path.suffix == ".parquet" else str(path)
        assert f"`{shown}`" in sources, shown


def test_every_address_above_evaluate_is_one_the_release_records() -> None:
    """No invented address (a kit URL that nothing records, say): each link is a recorded address or a page of one."""
    recorded = recorded_addresses()
    for url in URL.findall(dataset_part()):
        url = url.rstrip(".,;:")
        assert any(url == r or url.startswith(r + "/") for r in recorded), url


def test_kit_paths_named_above_evaluate_exist_in_the_kit() -> None:
    """The card tells Hub readers that paths are kit paths; they must be real ones."""
    named = {p for p in re.findall(r"`([^`\s<>:]+)`", dataset_part()) if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", p)}
    kit_paths = {p for p in named if p.startswith(KIT_FOLDERS) or ("/" not in p and p.endswith((".py", ".md", ".cff")))}
    assert {"scripts/evaluate.py", "scripts/publish.py", "AsynCodeBench.py", "schemas/"} <= kit_paths
    missing = sorted(p for p in kit_paths if not (ROOT / p).exists())
    assert not missing, missing


def test_links_to_sections_lead_to_headings_of_the_card() -> None:
    anchors = {heading_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", card_text(), re.MULTILINE)}
    for target in re.findall(r"\]\(#([^)]+)\)", dataset_part()):
        assert target in anchors, target


# --- citation --------------------------------------------------------------------------------------------


def test_card_bibtex_is_citation_cff_rendered() -> None:
    assert card_bibtex() == bibtex(read_cff(ROOT / "CITATION.cff"))


def test_card_bibtex_carries_the_title_authors_year_and_address_of_citation_cff() -> None:
    """Read field by field, independently of the renderer: a year needs `date-released` in CITATION.cff."""
    cff = read_cff(ROOT / "CITATION.cff")
    fields = dict(re.findall(r"^\s*(\w+)\s*=\s*\{(.*)\},?$", card_bibtex(), re.MULTILINE))
    released = cff["date-released"]
    assert isinstance(released, datetime.date)
    assert fields["year"] == str(released.year) == "2026"
    assert fields["title"] == cff["title"]
    assert fields["url"] == cff["url"] == HOMEPAGE
    assert cff["version"] in fields["note"]
    for author in cff["authors"]:
        assert author.get("name", author.get("family-names")) in fields["author"]


def test_builder_info_citation_is_the_card_bibtex(tmp_path: Path) -> None:
    assert CITATION == card_bibtex()
    assert AsynCodeBench(config_name="tasks", cache_dir=str(tmp_path)).info.citation == card_bibtex()


def test_citation_cff_without_a_release_date_is_refused_with_what_to_add(tmp_path: Path) -> None:
    cff = tmp_path / "CITATION.cff"
    cff.write_text(
        "\n".join(line for line in (ROOT / "CITATION.cff").read_text(encoding="utf-8").splitlines()
                  if not line.startswith("date-released")),
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="add date-released"):
        read_cff(cff)


def test_bibtex_renders_people_as_family_given_and_groups_whole() -> None:
    cff = {"title": "X", "version": "1", "date-released": "2026-01-05", "url": "https://example.org/x",
           "authors": [{"family-names": "Doe", "given-names": "Jane"}, {"name": "Team Y"}]}
    entry = bibtex(cff)
    assert "author       = {Doe, Jane and {Team Y}}" in entry
    assert "year         = {2026}" in entry and "month        = jan" in entry
