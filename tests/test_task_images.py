"""Task images rebuilt from recipes: build, push, pin, reproducibility, the image map and validation.

CI cannot reach GitHub, so the path is exercised on the demo task: its repository is a local git repository with
the base commit and, after it, the complete code (the gold patch), which stands in for a Commit0 repository's
parent commit. The 15 real tasks are covered by scripts/fidelity_table.py and the fidelity table in docs/images.md.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.checkout import DEMO_DIR, DEMO_TASK_ID, SCRIPTS, script_env
from helpers.dataset_folders import DemoDataset, RebuiltDemo, write_variant_dataset

from asyncodebench.images import recipes, task_build

COMMIT0_TASKS = sorted(p.stem for p in (DEMO_DIR.parent / "tasks").glob("*.yaml")
                       if not p.name.endswith((".image.yaml", ".audit.yaml"))
                       and yaml.safe_load(p.read_text())["source_task_id"].startswith("commit0:"))


def _script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True,
                          env=script_env(), timeout=timeout)


def _validate(dataset: Path, rebuilt: RebuiltDemo, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return _script("validate_task_image.py", DEMO_TASK_ID, "--images", str(rebuilt.map_path), "--dataset",
                   str(dataset), "--repo", str(rebuilt.repo), "--out", str(out), "--timeout", "20",
                   "--probe-timeout", "10", *extra)


def test_every_commit0_task_has_a_recipe_and_tvm_has_none() -> None:
    assert len(COMMIT0_TASKS) == 15
    assert recipes.all_task_ids() == [f"asyncodebench:{name}" for name in COMMIT0_TASKS]
    for task_id in recipes.all_task_ids():
        recipe = recipes.load(task_id)
        assert {r.split("==")[0] for r in recipe.requirements} >= {"pytest", "pytest-json-report"}
    with pytest.raises(recipes.RecipeError, match="no image recipe"):
        recipes.load("asyncodebench:apache-tvm-20018")


@pytest.mark.parametrize("recipe, message", [
    ("python: '3.10'\nrequirements: ['pytest>=8', 'pytest-json-report==1.5.0']\n", "must be pinned"),
    ("python: '3.10'\nrequirements: ['pytest==8.4.2']\n", "lack ['pytest-json-report']"),
    ("python: 3.10\nrequirements: ['pytest==8.4.2', 'pytest-json-report==1.5.0']\n", "must be a version"),
    ("python: '3.10'\nrequirements: []\nbase: debian\n", "unknown key(s) ['base']"),
], ids=["loose-pin", "no-json-report", "python-as-float", "unknown-key"])
def test_a_bad_recipe_says_what_is_wrong(tmp_path: Path, recipe: str, message: str) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "task.yaml").write_text((DEMO_DIR / "task.yaml").read_text())
    (tmp_path / "demo" / "task.image.yaml").write_text(recipe)
    with pytest.raises(recipes.RecipeError) as raised:
        recipes.load(DEMO_TASK_ID, tmp_path)
    assert message in str(raised.value)


@pytest.mark.docker
def test_the_build_pushes_pins_and_records_the_image(rebuilt_demo: RebuiltDemo) -> None:
    ref = rebuilt_demo.pinned_ref
    assert ref.startswith("127.0.0.1:") and "/asyncodebench/minicache@sha256:" in ref
    entry = rebuilt_demo.entry
    assert entry["pinned_ref"] == ref and entry["provenance"] == "rebuilt"
    assert entry["recipe_sha256"] == recipes.load(DEMO_TASK_ID).digest()
    assert entry["base_image"].startswith("asyncodebench/task-base:bookworm-")
    base_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", entry["base_image"]],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert entry["base_image_digest"] == base_id
    assert entry["python_version"].startswith("3.11.")  # Debian's Python on the offline base
    # The image holds the base commit alone: the complete code of the next commit never reaches it.
    log = subprocess.run(["docker", "run", "--rm", "--network=none", ref, "git", "log", "--format=%H"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert log == [recipes.load(DEMO_TASK_ID).base_revision]
    assert subprocess.run(["docker", "run", "--rm", "--network=none", ref, "git", "cat-file", "-e",
                           rebuilt_demo.reference], capture_output=True).returncode != 0


@pytest.mark.docker
def test_a_cold_rebuild_gives_the_same_content_and_a_new_pin_that_the_map_takes_and_the_build_says(
        rebuilt_demo: RebuiltDemo, tmp_path: Path) -> None:
    shutil.copy(rebuilt_demo.map_path, tmp_path / "map.json")  # the map as the first build left it
    again = _script("build_task_image.py", DEMO_TASK_ID, "--repo", str(rebuilt_demo.repo), "--base", "local",
                    "--map", str(tmp_path / "map.json"), "--no-cache")
    assert again.returncode == 0, again.stderr[-3000:]
    entry = json.loads((tmp_path / "map.json").read_text())["images"][DEMO_TASK_ID]
    assert entry["content_sha256"] == rebuilt_demo.entry["content_sha256"]
    assert entry["recipe_sha256"] == rebuilt_demo.entry["recipe_sha256"]
    # new layer times, so a new registry digest: the map pins what was just pushed, and the build says it changed
    assert entry["pinned_ref"] == again.stdout.strip() != rebuilt_demo.pinned_ref
    assert f"the pinned reference of {DEMO_TASK_ID} changed (updated in the map; the same content)" in again.stderr
    assert f"was {rebuilt_demo.pinned_ref}" in again.stderr and "rerun python scripts/validate_task_image.py" in \
        again.stderr


def test_the_build_says_what_it_did_to_the_map() -> None:
    built = task_build.BuiltTaskImage("asyncodebench:x", "r/x@sha256:" + "1" * 64, "base", "sha256:b", "r", "c",
                                      "3.11.2", 1, "now")
    assert "new entry" in task_build.map_change(Path("m.json"), None, built)
    assert "same image as before" in task_build.map_change(Path("m.json"), built.map_entry(), built)
    changed = task_build.map_change(Path("m.json"), {**built.map_entry(), "pinned_ref": "r/x@sha256:0",
                                                     "content_sha256": "d"}, built)
    assert "changed (updated in the map; different content)" in changed and "was r/x@sha256:0" in changed


@pytest.mark.docker
def test_validation_matches_the_recorded_counts(demo_dataset: DemoDataset, rebuilt_demo: RebuiltDemo,
                                                tmp_path: Path) -> None:
    done = _validate(demo_dataset.path, rebuilt_demo, tmp_path, "--reference-revision", rebuilt_demo.reference,
                     "--repeat", "2")
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout
    record = json.loads((tmp_path / "minicache.json").read_text())
    assert record["image"] == rebuilt_demo.pinned_ref and record["provenance"] == "rebuilt"
    assert record["counts_match"] is True and record["repeat"] == 2
    base, reference = record["states"]["base"], record["states"]["reference"]
    assert base["counts"] == [{"collected": 25, "passed": 7, "failed": 18, "errors": 0, "skipped": 0}] * 2
    assert reference["counts"] == [{"collected": 25, "passed": 25, "failed": 0, "errors": 0, "skipped": 0}] * 2
    assert not any(s[k] for s in (base, reference) for k in ("flaky_tests", "flaky_selectors"))
    groups = [g for point in record["dependency_points"] for g in point["groups"].values()]
    assert len(groups) == 9 and all(g["discriminates"] for g in groups)
    assert "| base | 25/7/18/0/0 | 25/7/18/0/0 | yes |" in (tmp_path / "minicache.md").read_text()


@pytest.mark.docker
def test_validation_fails_on_wrong_recorded_counts(demo_dataset: DemoDataset, rebuilt_demo: RebuiltDemo,
                                                   tmp_path: Path) -> None:
    task = yaml.safe_load((DEMO_DIR / "task.yaml").read_text())
    wrong = [dict(s, passed=s["passed"] + 1, failed=s["failed"] - 1) if s["evidence_scope"] == "public_initial_state"
             else s for s in task["expected_test_counts"]]
    dataset = write_variant_dataset(tmp_path / "dataset", demo_dataset.digest, [{"expected_test_counts": wrong}])
    done = _validate(dataset, rebuilt_demo, tmp_path / "out", "--reference-revision", rebuilt_demo.reference,
                     "--repeat", "1")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "| base | 25/7/18/0/0 | 25/8/17/0/0 | **no** |" in done.stdout
    assert "Counts match the record: no." in done.stdout


@pytest.mark.docker
def test_a_base_without_parent_needs_the_reference_revision(demo_dataset: DemoDataset, tmp_path: Path,
                                                            rebuilt_demo: RebuiltDemo) -> None:
    # The demo's base commit is a root commit: there is no parent to take the complete code from.
    done = _validate(demo_dataset.path, rebuilt_demo, tmp_path)
    assert done.returncode == 3 and "--reference-revision" in done.stderr and "Traceback" not in done.stderr


def test_with_overlays_the_reference_patch_starts_from_the_overlaid_base(tmp_path: Path) -> None:
    """Agents' patches apply on top of the overlays, so the reference patch must too: it is the diff from the base
    with its overlays applied (an overlay that stubs the very lines the complete code replaces would otherwise make
    the reference patch fail to apply)."""
    from asyncodebench.images.validation import reference_patch

    repo, work = tmp_path / "repo", tmp_path / "work"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)

    def commit(text: str, other: str = "kept\n") -> str:
        (repo / "lib.py").write_text(text)
        (repo / "other.py").write_text(other)
        subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
        subprocess.run([*git, "-C", str(repo), "commit", "-qm", "x"], check=True)
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()

    complete = "def size():\n    return 3\n"
    commit(complete, "complete\n")  # the parent holds the complete code
    base = commit("def size():\n    pass\n")  # the base stubs it
    overlay = (b"--- a/lib.py\n+++ b/lib.py\n@@ -1,2 +1,2 @@\n def size():\n-    pass\n+    return 0\n")

    def applies(patch: bytes, overlays: tuple[bytes, ...]) -> bool:
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
        subprocess.run(["git", "-C", str(work), "checkout", "-q", base], check=True)
        for number, extra in enumerate((*overlays, patch)):
            (tmp_path / f"{number}.patch").write_bytes(extra)
            if subprocess.run(["git", "-C", str(work), "apply", str(tmp_path / f"{number}.patch")],
                              capture_output=True).returncode != 0:
                return False
        return (work / "lib.py").read_text() == complete and (work / "other.py").read_text() == "kept\n"

    _, bare = reference_patch(str(repo), tmp_path / "cache", base, None, ("lib.py",))
    _, overlaid = reference_patch(str(repo), tmp_path / "cache", base, None, ("lib.py",), {"o.patch": overlay})
    assert applies(bare, ()) and not applies(bare, (overlay,))
    assert applies(overlaid, (overlay,))  # and other.py, outside the paths, stays the base's


def test_flaky_outcomes_and_varying_ids_are_told_apart() -> None:
    from asyncodebench.images.validation import StateRun, flaky, varying_ids

    runs = [
        StateRun(None, {"t::a": "passed", "t::b": "passed", "t::when[19:57:45]": "passed"}, {"t::a": "passed"}, 1.0),
        StateRun(None, {"t::a": "failed", "t::b": "passed", "t::when[19:58:25]": "passed"}, {"t::a": "failed"}, 1.0),
        StateRun(None, {"t::a": "passed", "t::b": "passed", "t::when[19:58:58]": "passed"}, {"t::a": "passed"}, 1.0),
    ]
    assert flaky(runs, "tests") == {"t::a": {"failed": 1, "passed": 2}}
    assert flaky(runs, "selectors") == {"t::a": {"failed": 1, "passed": 2}}
    assert varying_ids(runs) == ["t::when[19:57:45]", "t::when[19:58:25]", "t::when[19:58:58]"]
