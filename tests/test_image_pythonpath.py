"""An image's own PYTHONPATH is honoured the official way, without letting the work tree stand in for pytest.

Many task images set PYTHONPATH (a source folder of the repository, or a library folder of the image). The
evaluated pytest must see those folders as the official evaluator does, after the work tree's roots; a folder of
the image outside the work tree is the image's own, while a folder inside the work tree holds evaluated code and is
an import root like `src/`: a module planted there that would shadow pytest is removed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.dataset_folders import DemoDataset, write_variant_dataset
from helpers.demo_run import EvalRun
from helpers.payloads.hostile import FAKE_PYTEST, PatchMaker
from helpers.predictions import prediction

from asyncodebench.images.registry import push_image

pytestmark = pytest.mark.docker

IN_TREE, OUTSIDE = "/testbed/extra_src", "/opt/image-lib"
SHOW_PATH = '''
import atexit as _a, sys as _s
_a.register(lambda: print("SYSPATH " + "|".join(_s.path), flush=True))
'''


@pytest.fixture(scope="module")
def pythonpath_dataset(demo_dataset: DemoDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo image plus `ENV PYTHONPATH=<in tree>:<outside>`, pushed to the local registry, as a dataset."""
    context = tmp_path_factory.mktemp("pythonpath-image")
    (context / "image-lib").mkdir()
    (context / "image-lib" / "imagelib_marker.py").write_text("MARK = 1\n")
    (context / "Dockerfile").write_text(f"FROM {demo_dataset.pinned_ref}\nCOPY image-lib {OUTSIDE}\n"
                                        f"ENV PYTHONPATH={IN_TREE}:{OUTSIDE}\n")
    repository = demo_dataset.pinned_ref.split("@", 1)[0] + "-pythonpath"
    subprocess.run(["docker", "build", "--network", "none", "-q", "-t", f"{repository}:v0", str(context)],
                   check=True, capture_output=True)
    digest = push_image(f"{repository}:v0")
    return write_variant_dataset(context / "dataset", digest,
                                 [{"container_image": f"{repository}:v0", "container_digest": digest}])


@pytest.fixture(scope="module")
def pythonpath_run(pythonpath_dataset: Path, evaluate) -> EvalRun:
    maker = PatchMaker()
    try:
        core = (maker.repo / "minicache" / "core.py").read_text()
        show = maker.diff({"minicache/core.py": core + SHOW_PATH})
        shadow = maker.diff({"extra_src/pytest.py": FAKE_PYTEST, "extra_src/__init__.py": ""})
    finally:
        maker.close()
    return evaluate([prediction("show-path", show), prediction("shadow-in-image-path", shadow)], pythonpath_dataset,
                    "--timeout", "30", "--probe-timeout", "10", "--no-probes")


def test_the_image_pythonpath_follows_the_work_tree_roots_before_site_packages(pythonpath_run: EvalRun) -> None:
    assert pythonpath_run.returncode == 0, pythonpath_run.stderr[-2000:]
    output = (pythonpath_run.folder("show-path") / "evaluator_output.txt").read_text()
    (line,) = [line for line in output.splitlines() if line.startswith("SYSPATH ")]
    path = line[len("SYSPATH "):].split("|")
    order = [path.index(p) for p in ("/testbed", "/testbed/src", IN_TREE, OUTSIDE)]
    assert order == sorted(order)
    site = min(i for i, p in enumerate(path) if p.endswith(("site-packages", "dist-packages")))
    stdlib = min(i for i, p in enumerate(path) if p.endswith(("/python3.11", "/lib-dynload")))
    assert stdlib < order[0] and order[-1] < site


def test_a_pytest_planted_in_a_work_tree_folder_of_the_image_pythonpath_is_removed(pythonpath_run: EvalRun) -> None:
    row = pythonpath_run.row("shadow-in-image-path")
    assert row["hazards_removed"] == ["extra_src/pytest.py"]
    assert (row["tests_passed"], row["final_success"]) == (7, False)
