"""The dataset card as the Hub shows it, without the kit: sizes equal to what `datasets` reports, the address of every
source, the sections of the Hub's card template, one BibTeX entry that agrees with CITATION.cff, a card short enough
to read (the kit's manual lives in docs/, linked from it), and links that open, on GitHub and on the Hub.
"""

from __future__ import annotations

import datetime
import re
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers import markdown

from AsynCodeBench import AsynCodeBench
from asyncodebench.dataset.build import CITATION, HOMEPAGE
from asyncodebench.dataset.citation import bibtex, read_cff
from asyncodebench.dataset.export import PARQUET_NAME, split_front_matter
from asyncodebench.dataset.features import FEATURES
from asyncodebench.dataset.notices import OVERLAY_REPOSITORY
from asyncodebench.dataset.publish import hub_files

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "README.md"
DOCS = ROOT / "docs"
CARD_LIMIT = 15_000  # bytes, front matter included (issue 20): the card says what the data is; docs/ has the manual
MANUAL = ("quickstart", "evaluate", "agents", "ray", "pages", "integrity", "images", "benchmarks")  # docs/<page>.md
KEPT_AS_THEY_ARE = ("METRICS.md", "probe_attribution.md")  # a verbatim copy and a measurement's page, headed their way
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
    """The card's body, below the front matter."""
    _, body = split_front_matter(card_text())
    return body


def section(heading: str) -> str:
    """The text under `heading` (a level-2 heading, without `## `), up to the next level-2 heading."""
    parts = re.split(r"^## ", dataset_part(), flags=re.MULTILINE)
    matching = [p for p in parts if p.startswith(heading + "\n")]
    assert len(matching) == 1, f"the card needs exactly one '## {heading}' section"
    return matching[0]


def markdown_pages() -> list[Path]:
    """The card and every page of docs/."""
    return [CARD, *sorted(DOCS.glob("*.md"))]


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


def test_card_has_the_sections_of_the_hub_card_template() -> None:
    lines = dataset_part().splitlines()
    missing = [h for h in TEMPLATE_HEADINGS if h not in lines]
    assert not missing, f"add these sections to the card: {missing}"


def test_card_is_a_card_under_15000_bytes() -> None:
    size = len(CARD.read_bytes())
    assert size < CARD_LIMIT, (f"README.md is {size} bytes, front matter included; keep it under {CARD_LIMIT}: "
                               "move detail to a docs/ page and link it")


def test_sources_name_the_hub_repository_the_upstream_harness_and_every_task_source() -> None:
    sources = section("Dataset sources")
    assert HOMEPAGE in sources and OVERLAY_REPOSITORY in sources
    for row in task_rows():
        assert row["repository_url"] in sources, row["task_id"]
        if row["pull_request_url"]:
            assert row["pull_request_url"] in sources, row["task_id"]


def test_sources_list_exactly_the_files_the_hub_repository_holds() -> None:
    """Pages and pictures of docs/ are named by their folder (`docs/*.md`): which ones go is what the card links."""
    sources = section("Dataset sources")
    for path in hub_files():
        if path.suffix == ".parquet":
            shown = f"data/<config>/{PARQUET_NAME}"
        elif path.parts[0] == "docs":
            shown = f"{path.parent}/*{path.suffix}"
        else:
            shown = str(path)
        assert f"`{shown}`" in sources, shown


def test_every_address_of_the_card_is_one_the_release_records() -> None:
    """No invented address (a kit URL that nothing records, say): each link is a recorded address or a page of one."""
    recorded = recorded_addresses()
    for url in URL.findall(dataset_part()):
        url = url.rstrip(".,;:")
        assert any(url == r or url.startswith(r + "/") for r in recorded), url


def test_kit_paths_named_in_the_card_exist_in_the_kit() -> None:
    """The card tells Hub readers that paths are kit paths; they must be real ones."""
    named = {p for p in re.findall(r"`([^`\s<>:]+)`", dataset_part()) if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", p)}
    kit_paths = {p for p in named if p.startswith(KIT_FOLDERS) or ("/" not in p and p.endswith((".py", ".md", ".cff")))}
    assert {"scripts/evaluate.py", "scripts/publish.py", "AsynCodeBench.py", "schemas/"} <= kit_paths
    missing = sorted(p for p in kit_paths if not (ROOT / p).exists())
    assert not missing, missing


def test_links_to_sections_lead_to_headings_of_the_card() -> None:
    anchors = {heading_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", markdown.prose(card_text()), re.MULTILINE)}
    targets = [t[1:] for t in markdown.links(dataset_part()) if t.startswith("#")]
    assert targets and anchors == markdown.anchors(card_text())
    for target in targets:
        assert target in anchors, target


def test_every_relative_link_of_the_card_and_the_docs_opens_a_file_and_its_heading() -> None:
    """GitHub and the Hub resolve a link from the page's folder and an `#anchor` against the target's headings."""
    broken, checked = [], 0
    for page in markdown_pages():
        for target in markdown.links(page.read_text(encoding="utf-8")):
            if not markdown.is_relative(target) and not target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            checked += 1
            if not file.is_relative_to(ROOT) or not file.is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and (file.suffix != ".md" or anchor not in markdown.anchors(file.read_text(encoding="utf-8"))):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading in {file.relative_to(ROOT)})")
    assert checked > 30  # the card and the manual link each other; none found would mean the parsing broke
    assert not broken, broken


def test_the_hub_gets_every_docs_file_the_card_reaches_and_every_link_of_those_pages_opens_there() -> None:
    """Walked from the card, independently of the publish code: a page it links (or a page those link) goes to the Hub
    with the pictures it shows, and nothing a published page links is left behind."""
    shipped = {p.as_posix() for p in hub_files()}
    reached: set[str] = set()
    pages, left_behind = ["README.md"], []
    while pages:
        page = pages.pop()
        for target in markdown.links((ROOT / page).read_text(encoding="utf-8")):
            if not markdown.is_relative(target):
                continue
            rel = (ROOT / page).parent.joinpath(target.partition("#")[0]).resolve().relative_to(ROOT).as_posix()
            if rel not in shipped:
                left_behind.append(f"{page} links {rel}")
            elif rel not in reached:
                reached.add(rel)
                if rel.endswith(".md"):
                    pages.append(rel)
    assert not left_behind, left_behind
    assert {p for p in shipped if p.startswith("docs/")} == {p for p in reached if p.startswith("docs/")}
    assert {f"docs/{page}.md" for page in MANUAL} | {"docs/METRICS.md", "docs/fields.md"} <= reached


def test_release_kit_section_gives_the_two_commands_and_links_every_manual_page() -> None:
    kit = section("Release kit")
    assert "bash scripts/run_demo.sh" in kit and "bash scripts/run_tests.sh" in kit
    assert {f"docs/{page}.md" for page in MANUAL} <= set(markdown.links(kit))


def test_each_manual_page_says_what_it_covers_and_links_back_to_the_card() -> None:
    pages = [p for p in sorted(DOCS.glob("*.md")) if p.name not in KEPT_AS_THEY_ARE]
    assert {f"{page}.md" for page in MANUAL} <= {p.name for p in pages}
    for page in pages:
        title, blank, what = page.read_text(encoding="utf-8").splitlines()[:3]
        assert title.startswith("# ") and blank == "", page.name
        assert "../README.md" in markdown.links(what) and len(what.split()) > 8, page.name


def test_configurations_name_every_field_and_the_fields_page_describes_each() -> None:
    configurations = section("Configurations")
    fields_page = (DOCS / "fields.md").read_text(encoding="utf-8")
    for config, features in FEATURES.items():
        (entry,) = re.findall(rf"^- \*\*`{config}`\*\*(.*?)(?=^- |\Z)", configurations, re.MULTILINE | re.DOTALL)
        assert re.findall(r"`(\w+)`", entry) == list(features), config
        table = fields_page.split(f"\n## `{config}`", 1)[1].split("\n## ", 1)[0]
        described = [name for line in table.splitlines() if line.startswith("| `")
                     for name in re.findall(r"`(\w+)`", line.split("|")[1])]
        assert described == list(features), config


def test_the_card_has_one_citation_section() -> None:
    headings = markdown.HEADING.findall(markdown.prose(card_text()))
    assert [h for h in headings if re.search(r"\bcit(e|ation)\b", h, re.IGNORECASE)] == ["How to cite"]
    assert card_text().count("```bibtex") == 1


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
