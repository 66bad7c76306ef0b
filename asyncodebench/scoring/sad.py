"""The SAD proxy: consumer-side symbols that look like re-implementations of a producer contract (METRICS section
7, item 2), counted only where a dependency enables SAD (decision 6).

Pure functions over a diff and the dependency points, so they are tested without Docker. The proxy only nominates
candidates for human audit: it is not strict SAD.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from asyncodebench.scoring.dependency import DependencyPoint

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")
_DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)")
SAD_STOPWORDS = frozenset({
    "cache", "cached", "class", "clear", "contract", "decorator", "decorators", "function", "functions",
    "metadata", "method", "methods", "probe", "probes", "test", "tests", "wrapper",
})
"""Words too generic to tie a consumer's new symbol to a producer contract (METRICS 7, item 2)."""


def _normalize(name: str) -> str:
    """Lowercase and drop underscores, so `hash_key` and `hashkey` compare equal."""
    return name.lower().replace("_", "")


def producer_tokens(dependency: DependencyPoint) -> frozenset[str]:
    """Words naming the producer's contract, mined from the dependency's id, summary, files and upstream probes."""
    text = " ".join((dependency.dependency_id, dependency.contract_summary,
                     *dependency.producer_files, *dependency.upstream_probe_tests))
    tokens = {_normalize(word) for word in _IDENTIFIER.findall(text)}
    tokens = {token for token in tokens if len(token) >= 4 and token not in SAD_STOPWORDS}
    tokens |= {marker for marker in ("hash", "typed") if any(marker in token for token in tokens)}
    return frozenset(tokens)


def _definition_lines(diff: str) -> dict[str, tuple[set[str], set[str]]]:
    """Per file of a unified diff (keyed by new path): the def/class names on added lines, and those the diff shows
    existing at base (on removed lines, context lines and hunk headers, which git fills from the old file)."""
    files: dict[str, tuple[set[str], set[str]]] = {}
    current: tuple[set[str], set[str]] | None = None
    previous = ""
    for line in diff.splitlines():
        if line.startswith("+++ ") and previous.startswith("--- "):
            path = line[4:].split("\t")[0].strip()
            current = None if path == "/dev/null" else files.setdefault(path.removeprefix("b/"), (set(), set()))
        elif current is not None and line[:1] in ("+", "-", " "):
            match = _DEFINITION.match(line[1:])
            if match:
                current[0 if line[0] == "+" else 1].add(match.group(1))
        elif current is not None and line.startswith("@@"):
            match = _DEFINITION.match(line.split("@@", 2)[-1])
            if match:
                current[1].add(match.group(1))
        previous = line
    return files


def new_definitions(diff: str) -> dict[str, set[str]]:
    """Normalized names of the functions and classes on the added lines of each file of a diff, keyed by new path,
    without the names the same file already defined at base, as far as the diff shows.

    A `def` line whose file's diff also removes (or shows as context, or names in a hunk header) a definition of the
    same name is an edit of an existing definition (a re-quoted signature, a moved function), not a new one. Only
    the diff is read: a name defined at base outside every hunk is not seen, so such a redefinition still counts.
    """
    new = {path: {_normalize(n) for n in added - base if _normalize(n)}
           for path, (added, base) in _definition_lines(diff).items()}
    return {path: names for path, names in new.items() if names}


def sad_proxy_candidates(dependencies: Sequence[DependencyPoint], diff: str) -> list[tuple[str, str]]:
    """Consumer-side symbols that look like re-implementations of a producer contract (the SAD proxy, term 2).

    Only dependencies whose `metrics_enabled` lists SAD and whose producer is a specialist are examined. A new
    symbol in one of the consumer's files (see `new_definitions`: edited existing definitions do not count) is a
    candidate when a producer token is part of its name or its name is part of a token. The result holds unique
    (consumer_file, symbol) pairs, sorted; its length is the count. The proxy only nominates candidates for human
    audit: it is not strict SAD.
    """
    definitions = new_definitions(diff)
    pairs: set[tuple[str, str]] = set()
    for dependency in dependencies:
        if "SAD" not in dependency.metrics_enabled or dependency.producer_agent in ("", "integrator"):
            continue
        tokens = producer_tokens(dependency)
        for path in dependency.consumer_files:
            for symbol in definitions.get(path, ()):
                if any(token in symbol or symbol in token for token in tokens):
                    pairs.add((path, symbol))
    return sorted(pairs)
