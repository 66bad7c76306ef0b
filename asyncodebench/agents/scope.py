"""Writable paths applied to an agent's patch. Pure text work on git's own diffs (one `diff --git` section per file).

Two policies, one per kind of protocol. A single agent's edits outside its writable paths are dropped from its
patch (`restrict`) and listed; the harness has no scope rule for `model_patch`. A specialist's patch goes to the
harness whole, which rejects an artifact touching paths outside its agent's writable paths as a scope violation
(upstream's `reject_artifact_on_out_of_scope_change`, counted by the report's scope_violation_rate); the runner
only lists those paths (`out_of_scope`) and applies the same rule to the states it hands on.
"""

from __future__ import annotations

from asyncodebench.scoring.patches import outside_scope, touched_paths


def file_sections(patch: str) -> list[str]:
    """The diff cut into one section per file, each starting with its `diff --git` line (git's own output)."""
    sections: list[str] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git ") or not sections:
            sections.append(line)
        else:
            sections[-1] += line
    return sections


def out_of_scope(patch: str, writable: tuple[str, ...]) -> tuple[str, ...]:
    """The paths the patch touches outside `writable` (a writable entry is a file, or a folder ending with `/`)."""
    return outside_scope(touched_paths(patch).paths, writable)


def restrict(patch: str, writable: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The patch without the sections touching anything outside `writable` (a rename out of or into scope goes
    whole), and the outside paths dropped."""
    kept: list[str] = []
    dropped: list[str] = []
    for section in file_sections(patch):
        outside = out_of_scope(section, writable)
        if outside:
            dropped += outside
        else:
            kept.append(section)
    return "".join(kept), tuple(dict.fromkeys(dropped))
