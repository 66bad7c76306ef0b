"""Patch paths are read as git and patch(1) read them: C-quoted names decoded before any safety check."""

from __future__ import annotations

import pytest

from asyncodebench.scoring.patches import touched_paths


@pytest.mark.parametrize("header, path", [
    ('diff --git "a/\\056git/hooks/x" "b/\\056git/hooks/x"\n', ".git/hooks/x"),
    ('--- "a/\\056git/config"\n+++ "b/\\056git/config"\n', ".git/config"),
    ('diff --git "a/sub/\\056GIT/HEAD" "b/sub/\\056GIT/HEAD"\n', "sub/.GIT/HEAD"),
    ("*** a/.git/description\n--- b/.git/description\n", ".git/description"),
    ("--- a/minicache/core.py\n+++ b/../../tmp/x\n", "../../tmp/x"),
    ("Index: /etc/passwd\n", "/etc/passwd"),
    ('rename to "\\056\\056/outside"\n', "../outside"),
])
def test_escaping_names_are_decoded_and_refused(header: str, path: str) -> None:
    paths = touched_paths(header)
    assert path in paths.paths and path in paths.unsafe


@pytest.mark.parametrize("header, path", [
    ('diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"\n', "café.py"),
    ("diff --git a/my file.py b/my file.py\n--- a/my file.py\t\n+++ b/my file.py\n", "my file.py"),
    ('diff --git "a/tab\\there.py" "b/tab\\there.py"\n', "tab\there.py"),
    ("diff --git a/src/.github/x.yml b/src/.github/x.yml\n", "src/.github/x.yml"),
])
def test_ordinary_names_are_read_whole_and_allowed(header: str, path: str) -> None:
    paths = touched_paths(header)
    assert paths.paths == (path,) and paths.unsafe == ()


def test_a_quoted_name_with_a_lone_surrogate_is_read_not_a_crash() -> None:
    """A JSON escape such as \\ud800 in a quoted header (no byte makes it): the patch is judged as data."""
    found = touched_paths('diff --git "a/\ud800" b/x\n--- "a/\ud800"\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n')
    assert found.paths[1] == "x" and len(found.paths) == 2 and found.unsafe == ()
