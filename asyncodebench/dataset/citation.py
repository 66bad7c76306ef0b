"""BibTeX for AsynCodeBench, rendered from `CITATION.cff`, the one place the citation is written down.

GitHub's "Cite this repository" reads `CITATION.cff`; the dataset card and the builder's `DatasetInfo.citation` carry
BibTeX. Rendering the BibTeX from the CFF file (and testing that the copies equal the rendering) keeps the three from
drifting apart: change `CITATION.cff`, then paste the new rendering (`python -m asyncodebench.dataset.citation`).
"""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CFF_PATH = Path(__file__).resolve().parents[2] / "CITATION.cff"


def read_cff(path: Path = CFF_PATH) -> dict[str, Any]:
    """The CFF fields; `date-released` is required, because without it the BibTeX would have no year.

    Raises:
        ValueError: the file has no `date-released`, no title or no authors.
    """
    cff: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = [key for key in ("title", "authors", "version", "date-released", "url") if not cff.get(key)]
    if missing:
        raise ValueError(f"{path}: add {', '.join(missing)} (the BibTeX entry needs them)")
    return cff


def bibtex(cff: dict[str, Any]) -> str:
    """One `@misc` entry (the kind every BibTeX style knows): title, authors, year and month of `date-released`, the
    version in a note, and the dataset's address."""
    released = _date(cff["date-released"])
    fields = [
        ("title", f"{{{cff['title']}}}"),
        ("author", "{" + " and ".join(_author(a) for a in cff["authors"]) + "}"),
        ("year", f"{{{released.year}}}"),
        ("month", released.strftime("%b").lower()),
        ("note", f"{{Dataset, version {cff['version']}}}"),
        ("howpublished", f"{{\\url{{{cff['url']}}}}}"),
        ("url", f"{{{cff['url']}}}"),
    ]
    key = re.sub(r"[^a-z0-9]", "", str(cff["title"]).lower()) + str(released.year)
    width = max(len(name) for name, _ in fields)
    body = ",\n".join(f"  {name.ljust(width)} = {value}" for name, value in fields)
    return f"@misc{{{key},\n{body}\n}}"


def _date(value: Any) -> datetime.date:
    return value if isinstance(value, datetime.date) else datetime.date.fromisoformat(str(value))


def _author(author: dict[str, Any]) -> str:
    """A person as `Family, Given`; an organisation or collective in braces, so BibTeX keeps the name whole."""
    if "family-names" in author:
        given = f", {author['given-names']}" if author.get("given-names") else ""
        return f"{author['family-names']}{given}"
    return f"{{{author['name']}}}"


if __name__ == "__main__":
    print(bibtex(read_cff(Path(sys.argv[1]) if len(sys.argv) > 1 else CFF_PATH)))
