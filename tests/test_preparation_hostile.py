"""The preparation judges the tree a patch leaves, whatever git would make of it (issue 16, attack class 8).

Real preparations in real containers of the demo image (`Workbench.prepared`): restored test targets hold the base
bytes whatever `.gitattributes` the patch brings; symlinks out of the tree or into `.git` are refused whatever their
names; odd names are recorded as text; deep and large trees are prepared; and whatever breaks the preparation of a
patched tree is the patch's outcome ("unusable"), never an infrastructure error. The host's reading of the record
and the in-container tree functions are also checked alone, with a stand-in container and a local folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers.payloads.hostile import PatchMaker
from helpers.payloads.tree import (
    ATTRIBUTES,
    ODD_SYMLINKS,
    TEST_API,
    TEST_CORE,
    added,
    attributes_patch,
    cheating_tests,
    deep_path,
    gitmodules_patch,
    many_files,
    symlink,
)

from asyncodebench.harness.evaluation import Settings, Workbench, evidence_from
from asyncodebench.harness.sandbox import (
    IO_DIR,
    OVERSIZED,
    ExecResult,
    Limits,
    SandboxUnavailableError,
    docker_client,
    remove_run_containers,
)
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.harness.workspace import (
    PREPARE_RECORD,
    PREPARE_STAGE,
    SCRIPTS_DIR,
    Preparation,
    prepare,
    prepare_inputs,
)
from asyncodebench.images.demo import DEMO_REPO
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import score
from asyncodebench.run.store import stored_preparation

pytestmark = pytest.mark.docker

RUN_ID = "preparation-hostile"
TESTS = (TEST_CORE, TEST_API)


@pytest.fixture(scope="module")
def spec(demo_spec: TaskSpec) -> TaskSpec:
    return demo_spec


@pytest.fixture(scope="module")
def bench(spec: TaskSpec) -> Iterator[Workbench]:
    client = docker_client()
    try:
        yield Workbench.open(client, spec, RUN_ID, Settings(limits=Limits(memory="1g")), {})
    finally:
        remove_run_containers(client, RUN_ID)


@pytest.fixture(scope="module")
def cheats() -> Iterator[dict[str, str]]:
    maker = PatchMaker()
    try:
        yield cheating_tests(maker)
    finally:
        maker.close()


def prepared(bench: Workbench, patch: str, *read: str) -> tuple[Preparation, dict[str, bytes | None]]:
    """Prepare a fresh container with `patch`; the bytes of the `read` paths of its work tree, as left there."""
    with bench.prepared(patch.encode("utf-8", "surrogateescape")) as (box, preparation):
        return preparation, {path: box.read_file(f"{bench.spec.workdir}/{path}", 1 << 20) for path in read}


def base_bytes(path: str) -> bytes:
    return (DEMO_REPO / path).read_bytes()


# --- git never obeys the tree -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(ATTRIBUTES))
def test_restored_tests_hold_the_base_bytes_whatever_attributes_the_patch_brings(
        bench: Workbench, cheats: dict[str, str], variant: str) -> None:
    folder, _ = ATTRIBUTES[variant]
    attributes = f"{folder}.gitattributes"
    preparation, files = prepared(bench, attributes_patch(cheats, variant), *TESTS, attributes)
    assert preparation.patch_status == "applied" and preparation.unusable_reason is None
    assert {path: files[path] == base_bytes(path) for path in TESTS} == {path: True for path in TESTS}
    assert files[attributes] is None
    # tests/ is a test target as a whole (the evaluator runs `pytest tests`): what the patch added there goes too
    recorded = preparation.untracked_paths_removed if folder == "tests/" else preparation.hazards_removed
    assert recorded == (attributes,)
    assert preparation.restored_paths == (TEST_API if folder else TEST_CORE,)
    assert preparation.changed_paths == ()


def test_a_gitmodules_file_is_removed_and_the_test_restored(bench: Workbench, cheats: dict[str, str]) -> None:
    preparation, files = prepared(bench, gitmodules_patch(cheats), TEST_CORE, ".gitmodules")
    assert (preparation.patch_status, preparation.hazards_removed) == ("applied", (".gitmodules",))
    assert files == {TEST_CORE: base_bytes(TEST_CORE), ".gitmodules": None}


def test_attributes_in_a_source_folder_are_removed_and_the_code_kept_as_written(bench: Workbench) -> None:
    """`ident` and `eol=crlf` beside edited code: the code stays as the patch wrote it, the attributes go."""
    code = "VERSION = '$Id$'\n"
    patch = added("minicache/.gitattributes", "* ident eol=crlf\n") + added("minicache/version.py", code)
    preparation, files = prepared(bench, patch, "minicache/version.py", "minicache/.gitattributes")
    assert preparation.hazards_removed == ("minicache/.gitattributes",)
    assert preparation.changed_paths == ("minicache/version.py",)
    assert files == {"minicache/version.py": code.encode(), "minicache/.gitattributes": None}


# --- the tree, not git's listing, is judged -----------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(ODD_SYMLINKS))
def test_symlinks_out_of_the_tree_or_into_git_are_unsafe_whatever_their_name(bench: Workbench, variant: str) -> None:
    name, target = ODD_SYMLINKS[variant]
    preparation, _ = prepared(bench, symlink(name, target))
    assert preparation.patch_status == "unsafe_paths" and not preparation.usable
    assert preparation.unsafe_paths == (name.decode("utf-8", "backslashreplace"),)


def test_odd_names_are_recorded_as_text_and_links_inside_the_tree_are_kept(bench: Workbench) -> None:
    names = ["minicache/a\nb.txt".encode(), b"minicache/\xff.txt", "minicache/café.txt".encode(),
             b'minicache/"quoted".txt']
    patch = "".join(added(name, "data\n") for name in names) + symlink("minicache/lien→core", "core.py")
    preparation, files = prepared(bench, patch, "minicache/lien→core")
    assert preparation.patch_status == "applied"
    assert sorted(preparation.changed_paths) == sorted(
        [n.decode("utf-8", "backslashreplace") for n in names] + ["minicache/lien→core"])
    assert "minicache/\\xff.txt" in preparation.changed_paths
    assert files == {"minicache/lien→core": None}  # a symlink, which read_file does not follow


def test_a_deep_tree_is_judged_without_recursion(bench: Workbench) -> None:
    leaf, planted = deep_path(1100, "leaf.txt"), deep_path(1100, "conftest.py")
    patch = added(leaf, "deep\n") + added(planted, "raise SystemExit('planted')\n")
    preparation, _ = prepared(bench, patch)  # (Docker's archive API cannot read that deep: the record tells)
    assert (preparation.patch_status, preparation.unusable_reason) == ("applied", None)
    assert (preparation.hazards_removed, preparation.changed_paths) == ((planted,), (leaf,))


def test_many_hazards_and_files_are_handled_in_one_batch(bench: Workbench) -> None:
    pyc = "minicache/__pycache__/m{i}.cpython-311.pyc"
    patch = many_files(2000, pyc) + many_files(2000, "bulk/{group}/f{i}.txt")
    preparation, files = prepared(bench, patch, pyc.format(i=7), "bulk/1/f1999.txt")
    assert preparation.patch_status == "applied"
    assert len(preparation.hazards_removed) == 2000 and len(preparation.changed_paths) == 2000
    assert files == {pyc.format(i=7): None, "bulk/1/f1999.txt": b"1999\n"}


def test_a_base_whose_own_attributes_convert_its_files_is_restored_as_checked_out(
        spec: TaskSpec, tmp_path: Path) -> None:
    """The canonical state is the base as git checked it out: with the base's own `eol=crlf`, a deleted test comes
    back with CRLF line ends (bytes no blob holds, kept aside before the patch), and nothing else counts as changed.
    prepare.py runs as a whole in a plain container of the demo image, on a repository made here."""
    base = tmp_path / "base"
    git = ["git", "-C", str(base), "-c", "user.name=t", "-c", "user.email=t@invalid"]
    (base / "tests").mkdir(parents=True)
    (base / ".gitattributes").write_text("*.py eol=crlf\n")
    (base / "tests" / "test_x.py").write_text("a = 1\nb = 2\n")
    subprocess.run(["git", "init", "-q", str(base)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (base / "tests" / "test_x.py").unlink()
    subprocess.run([*git, "checkout", "--", "."], check=True)
    checked_out = (base / "tests" / "test_x.py").read_bytes()
    assert checked_out == b"a = 1\r\nb = 2\r\n"
    revision = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    files = prepare_inputs("/w/work", revision, "python3", ("tests",), [],
                           b"diff --git a/tests/test_x.py b/tests/test_x.py\ndeleted file mode 100644\n"
                           b"--- a/tests/test_x.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a = 1\n-b = 2\n")
    config = json.loads(files["prepare.json"])
    config.update(base_dir="/w/base", patch="/w/io/patch.diff", git_global_config="/w/io/git/.gitconfig",
                  out_dir="/w/io/out", home_dir="/w/home", record_path="/w/io/record.json",
                  stage_path="/w/io/stage.json")
    files["prepare.json"] = json.dumps(config).encode()
    for name, data in files.items():
        (tmp_path / "io" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "io" / name).write_bytes(data)
    (tmp_path / "work").mkdir()
    tmp_path.chmod(0o755)  # the sandbox user applies the patch from in there
    subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{tmp_path}:/w", "--entrypoint", "python3",
                    spec.pinned_ref, "/w/io/prepare.py", "/w/io"], check=True, capture_output=True, timeout=300)
    record = json.loads((tmp_path / "io" / "record.json").read_text())
    assert (record["patch_status"], record["restored_paths"]) == ("applied", ["tests/test_x.py"])
    assert record["changed_paths"] == [] and record["hazards_removed"] == []
    assert (tmp_path / "work" / "tests" / "test_x.py").read_bytes() == checked_out


# --- a patch never makes an infrastructure error -------------------------------------------------------


def _prepare_with(bench: Workbench, **changes: Any) -> Preparation:
    """A preparation whose inputs differ from the harness's by `changes` (prepare_inputs keywords or config)."""
    spec = bench.spec
    inputs = dict(workdir=spec.workdir, base_revision=spec.base_revision, interpreter=spec.interpreter,
                  protected=(*spec.protected_paths, *spec.test_targets), overlays=[], patch=b"")
    inputs.update(changes)
    with bench.sandbox() as box:
        box.write_files(prepare_inputs(**inputs), IO_DIR)
        return prepare(box, spec.interpreter, spec.task_id)


def test_a_patched_tree_out_of_time_is_an_unusable_patch(bench: Workbench) -> None:
    preparation = _prepare_with(bench, patch=many_files(3000, "bulk/f{i}.txt").encode(), judge_seconds=0)
    assert (preparation.patch_status, preparation.usable) == ("unusable", False)
    assert "did not finish within" in preparation.unusable_reason
    assert preparation.canonical_ref == bench.spec.base_revision and preparation.image_plugins


def test_a_failure_before_the_patch_stays_an_infrastructure_error(bench: Workbench) -> None:
    with pytest.raises(SandboxUnavailableError, match="preparing"):
        _prepare_with(bench, base_revision="0" * 40)


@dataclass
class StandIn:
    """A container stand-in for `prepare`: what the command did, and the files it left."""

    result: ExecResult
    files: dict[str, Any]
    name: str = "stand-in"

    def exec(self, argv: list[str], timeout: float) -> ExecResult:
        return self.result

    def read_file(self, path: str, limit: int) -> Any:
        return self.files.get(path)


STAGE = b'{"stage": "patch", "base_head": "b", "canonical_ref": "c", "image": {"plugins": [["x", "x.plugin"]]}}'


@pytest.mark.parametrize("record, exit_code, reason", [
    (None, 1, "exit code 1"), (None, 137, "exit code 137"), (OVERSIZED, 0, "larger than the read limit"),
    (b'{"patch_status": "appl', 0, "exit code 0"),
], ids=["crashed", "killed", "oversized", "cut"])
def test_after_the_stage_marker_a_missing_record_is_the_patch_s_doing(record: Any, exit_code: int,
                                                                      reason: str) -> None:
    box = StandIn(ExecResult(exit_code, b"", 1.0), {PREPARE_STAGE: STAGE, PREPARE_RECORD: record})
    preparation = prepare(box, "python3", "task")  # type: ignore[arg-type]
    assert (preparation.patch_status, preparation.canonical_ref) == ("unusable", "c")
    assert preparation.image_plugins == ("x.plugin",) and reason in preparation.unusable_reason


@pytest.mark.parametrize("result", [ExecResult(1, b"fatal: bad revision", 1.0),
                                    ExecResult(None, b"", 330.0, killed_by_watchdog=True)],
                         ids=["before-the-patch", "container-killed"])
def test_without_the_stage_marker_or_the_container_it_is_the_environment_s(result: ExecResult) -> None:
    with pytest.raises(SandboxUnavailableError):
        prepare(StandIn(result, {}), "python3", "task")  # type: ignore[arg-type]


def test_an_unusable_patch_is_scored_zero_against_the_expected_total(spec: TaskSpec) -> None:
    preparation = Preparation("unusable", "", (), spec.base_revision, (), (), (), (), (),
                              unusable_reason="preparing the patched tree failed: RecursionError")
    prediction = Prediction(1, spec.task_id, "single", "m", None, "diff", (), {}, {})
    result = score(spec, prediction, evidence_from(spec, preparation, None, None, Settings()))
    assert result.status == "evaluated" and result.evaluation is not None
    graded = result.evaluation.score
    assert graded.outcome == "model_failure:patch_unusable"
    assert (graded.pass_rate, graded.tests_passed, graded.tests_denominator) == (0.0, 0, spec.expected_total)


def test_records_saved_before_the_reason_existed_still_load() -> None:
    old = {"patch_status": "applied", "patch_log": "", "unsafe_paths": [], "canonical_ref": "c",
           "restored_paths": [], "untracked_paths_removed": [], "hazards_removed": [], "changed_paths": [],
           "image_plugins": ["x"]}
    assert stored_preparation(old).unusable_reason is None and stored_preparation(old).usable


# --- the in-container tree functions, on a local folder -------------------------------------------------


@pytest.fixture()
def judge_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """prepare.py loaded here (it is standard library only), working in an empty folder as its work tree."""
    loaded = importlib.util.spec_from_file_location("prepare_under_test", SCRIPTS_DIR / "prepare.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)  # type: ignore[union-attr]
    monkeypatch.chdir(tmp_path)
    return module


def test_special_files_and_symlink_loops_are_unsafe(judge_module: Any, tmp_path: Path) -> None:
    os.mkfifo("fifo")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("socket")
        os.symlink("loop-b", "loop-a")
        os.symlink("loop-a", "loop-b")
        os.symlink("inside", "link")
        tree = judge_module.snapshot(False)
    root = os.fsencode(tmp_path.resolve())
    reasons = {path: judge_module.unsafe_reason(root, path, tree[path]) for path in tree}
    assert reasons == {b"fifo": "special file (FIFO, socket or device)",
                       b"socket": "special file (FIFO, socket or device)", b"loop-a": "symlink loop",
                       b"loop-b": "symlink loop", b"link": None}


def test_a_tree_deeper_than_the_recursion_limit_is_walked_and_removed(judge_module: Any, tmp_path: Path) -> None:
    try:
        for _ in range(1500):
            os.mkdir("d")
            os.chdir("d")
        Path("leaf").write_text("x")
        os.chdir(tmp_path)
        os.symlink("../" * 1201 + "outside", "d/" * 1200 + "up")  # 1,200 folders down, one folder above the tree
        tree = judge_module.snapshot(True)
        assert len(tree) == 1502 and tree[b"d/" * 1500 + b"leaf"][0] == "f"
        up = b"d/" * 1200 + b"up"
        assert judge_module.unsafe_reason(os.fsencode(tmp_path.resolve()), up, tree[up]) == \
            "symlink leaving the work tree"
        assert judge_module.clear(b"d") is True and not os.path.lexists("d")
    finally:
        os.chdir(tmp_path)
        subprocess.run(["rm", "-rf", "d"], check=True)  # pytest's own clean-up recurses


def test_names_git_would_quote_are_walked_and_shown_as_text(judge_module: Any) -> None:
    for name in (b"a\nb", b"\xff", "café".encode()):
        Path(os.fsdecode(name)).write_bytes(b"x")
    assert sorted(judge_module.shown(p) for p in judge_module.snapshot(False)) == ["\\xff", "a\nb", "café"]


def test_the_git_blob_id_is_git_s(judge_module: Any) -> None:
    Path("f").write_bytes(b"a\r\nb\x00")
    done = subprocess.run(["git", "hash-object", "--no-filters", "f"], capture_output=True, text=True, check=True)
    assert judge_module.file_blob_id(b"f") == done.stdout.strip()
