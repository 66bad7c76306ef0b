"""Infrastructure failures are reported apart, never scored as model failures, and a rerun of the run id recovers.

The daemon-death test runs its own dockerd (own data root, exec root, pidfile and socket, no bridge, no iptables)
and kills that one; the main daemon is never touched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from helpers.agent_scripts import SUBMIT, apply, demo_patch, run_agents, write_scripts
from helpers.checkout import DEMO_TASK_ID, ROOT, script_env
from helpers.daemon import Daemon
from helpers.dataset_folders import DemoDataset, write_variant_dataset
from helpers.demo_run import FAST_FLAGS, EvalRun, evaluate_command, run_evaluate
from helpers.predictions import example_predictions, jsonl, prediction

from asyncodebench.run.runfolder import container_key, result_files

pytestmark = pytest.mark.docker

MISMATCHED, MISSING = f"{DEMO_TASK_ID}-mismatched", f"{DEMO_TASK_ID}-missing"
EXPECTED = {  # model -> (outcome, tests passed): what each prediction scores when the infrastructure works
    "demo-gold": ("passed", 25), "demo-empty": ("failed", 7), "demo-partial": ("failed", 17),
    "demo-syntax-error": ("model_failure:collection_failed", 0), "hostile-conftest": ("failed", 7),
    "hostile-test-edit": ("failed", 7),
}


# --- images that cannot be used ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def image_failures(demo_dataset: DemoDataset, evaluate: Callable[..., EvalRun],
                   tmp_path_factory: pytest.TempPathFactory) -> EvalRun:
    image = demo_dataset.pinned_ref.split("@")[0] + ":v0"
    dataset = write_variant_dataset(tmp_path_factory.mktemp("bad-images"), demo_dataset.digest, [
        {},
        {"task_id": MISMATCHED, "container_digest": "sha256:" + "2" * 64},  # same name, another digest
        {"task_id": MISSING, "container_image": image.replace("demo-minicache", "never-pushed")},
    ])
    gold = example_predictions()["demo-gold"]["model_patch"]
    preds = [prediction("on-mismatched", gold, task_id=MISMATCHED), prediction("on-missing", gold, task_id=MISSING),
             prediction("on-good-image", gold)]
    return evaluate(preds, dataset, *FAST_FLAGS)


def test_digest_mismatch_is_refused_as_an_infrastructure_error(image_failures: EvalRun) -> None:
    row = image_failures.row("on-mismatched")
    assert row["status"] == "infrastructure_error" and row["infrastructure_error"]["kind"] == "image_mismatch"
    assert "outcome" not in row and "pass_rate" not in row  # not scored
    assert image_failures.report["run"]["images"][MISMATCHED]["state"] == "mismatch"


def test_missing_image_is_an_infrastructure_error(image_failures: EvalRun) -> None:
    row = image_failures.row("on-missing")
    assert row["status"] == "infrastructure_error" and row["infrastructure_error"]["kind"] == "image_missing"


def test_image_errors_are_not_scored_and_exit_3(image_failures: EvalRun) -> None:
    assert image_failures.returncode == 3
    assert image_failures.report["counts"] == {"valid_predictions": 3, "invalid_lines": 0, "evaluated": 1,
                                               "infrastructure_errors": 2, "not_evaluated": 0}
    summary = {r["model_name_or_path"]: r for r in image_failures.report["summary"]}
    assert summary["on-mismatched"]["evaluated"] == 0 and summary["on-mismatched"]["fsr"]["mean"] is None
    assert image_failures.row("on-good-image")["final_success"] is True


# --- the daemon dies during a run -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_daemon(demo_dataset: DemoDataset) -> Iterator[Daemon]:
    root = Path(tempfile.mkdtemp(prefix="acb-dd-", dir="/tmp"))  # short: the socket path must fit in 108 bytes
    daemon = Daemon(root)
    try:
        daemon.start()
        tag = demo_dataset.pinned_ref.split("@")[0] + ":v0"
        save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE)
        loaded = daemon.docker("load", stdin=save.stdout)
        save.wait()
        assert loaded.returncode == 0 and save.returncode == 0, loaded.stderr
        yield daemon
    finally:
        daemon.stop()
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_a_daemon_killed_while_creating_a_volume_starts_again() -> None:
    """A kill can leave a volume's options file empty; the restarted test daemon must still start (CI once failed
    three tests on exactly this)."""
    root = Path(tempfile.mkdtemp(prefix="acb-dt-", dir="/tmp"))
    torn = root / "data" / "volumes" / "torn-volume"
    (torn / "_data").mkdir(parents=True)
    (torn / "opts.json").write_bytes(b"")
    daemon = Daemon(root)
    try:
        daemon.start()
        listed = daemon.docker("volume", "ls", "-q", text=True)
        assert listed.returncode == 0 and "torn-volume" in listed.stdout.split()
    finally:
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


def check_images(daemon: Daemon, dataset: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "check_images.py"), "--dataset", str(dataset),
                           *flags], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=script_env({"DOCKER_HOST": daemon.host}))


def agents_on(daemon: Daemon, dataset: Path, out: Path) -> tuple[Any, Any]:
    """run_agents.py on the daemon whose image lacks its digest: without --pull (refused), then with it."""
    scripts = write_scripts(out / "gold.json", {"single_agent": [apply(demo_patch("gold")), SUBMIT]})
    flags = ("--scenarios", "*/single", "--name", "pulled")
    env = {"DOCKER_HOST": daemon.host}
    return (run_agents(scripts, dataset, out, "unpulled", *flags, env=env),
            run_agents(scripts, dataset, out, "pulled", *flags, "--pull", env=env))


@pytest.fixture(scope="module")
def daemon_death(own_daemon: Daemon, demo_dataset: DemoDataset, tmp_path_factory: pytest.TempPathFactory
                 ) -> dict[str, Any]:
    """Load the image, pull its digest, kill the daemon after the first result, restart it, rerun the run id."""
    facts: dict[str, Any] = {}
    # `docker load` restores the image but not its registry digest: the pinned reference is not there yet.
    facts["after_load"] = check_images(own_daemon, demo_dataset.path)
    facts["agents_unpulled"], facts["agents_pulled"] = agents_on(own_daemon, demo_dataset.path,
                                                                 tmp_path_factory.mktemp("agents-pull"))
    facts["after_pull"] = check_images(own_daemon, demo_dataset.path, "--pull")
    examples = example_predictions()
    output_dir = tmp_path_factory.mktemp("daemon-death")
    preds = output_dir / "preds.jsonl"
    preds.write_bytes(jsonl([examples[m] for m in EXPECTED]))
    env = script_env({"DOCKER_HOST": own_daemon.host})
    process = subprocess.Popen(evaluate_command(preds, demo_dataset.path, "dies", output_dir, *FAST_FLAGS),
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not result_files(output_dir / "dies") and time.monotonic() < deadline:
        time.sleep(0.02)
    own_daemon.kill()
    stdout, stderr = process.communicate(timeout=300)
    facts["interrupted"] = EvalRun(process.returncode, stdout, stderr, output_dir / "dies",
                                   json.loads((output_dir / "dies" / "report.json").read_text()))
    own_daemon.start()
    facts["resumed"] = run_evaluate(preds, demo_dataset.path, "dies", output_dir, *FAST_FLAGS,
                                    env={"DOCKER_HOST": own_daemon.host})
    label = facts["resumed"].report["run"]["container_label"]  # `dies-<8 hex>`: this run folder's key
    assert label == container_key(output_dir / "dies", "dies")
    facts["containers_after"] = own_daemon.docker("ps", "-aq", "--filter", f"label=org.asyncodebench.run_id={label}")
    return facts


def test_a_loaded_image_needs_its_digest_pulled_before_it_matches(daemon_death: dict[str, Any]) -> None:
    assert daemon_death["after_load"].returncode == 1 and "| missing |" in daemon_death["after_load"].stdout
    assert daemon_death["after_pull"].returncode == 0 and "| match |" in daemon_death["after_pull"].stdout


def test_run_agents_pulls_the_pinned_image_only_when_asked(daemon_death: dict[str, Any]) -> None:
    refused, pulled = daemon_death["agents_unpulled"], daemon_death["agents_pulled"]
    assert refused.returncode == 3 and "is missing" in refused.stderr and "rerun with --pull" in refused.stderr
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    (made,) = [json.loads(line) for line in Path(pulled.stdout.strip()).read_text().splitlines()]
    assert made["model_patch"] == demo_patch("gold")


def test_daemon_death_gives_infrastructure_errors_never_model_failures(daemon_death: dict[str, Any]) -> None:
    run = daemon_death["interrupted"]
    counts = run.report["counts"]
    assert run.returncode == 3, run.stderr[-3000:]
    assert counts["infrastructure_errors"] >= 1 and counts["evaluated"] >= 1
    assert counts["evaluated"] + counts["infrastructure_errors"] == counts["valid_predictions"] == len(EXPECTED)
    for row in run.report["predictions"]:
        if row["status"] == "evaluated":  # finished before the kill: scored as the code behaves
            assert (row["outcome"], row["tests_passed"]) == EXPECTED[row["model_name_or_path"]], row
        else:
            assert row["infrastructure_error"]["kind"] in ("sandbox_unavailable", "docker_unavailable"), row


def test_rerunning_the_run_id_after_a_restart_evaluates_everything(daemon_death: dict[str, Any]) -> None:
    run = daemon_death["resumed"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.report["counts"]["evaluated"] == len(EXPECTED) and run.report["counts"]["infrastructure_errors"] == 0
    assert {r["model_name_or_path"]: (r["outcome"], r["tests_passed"]) for r in run.report["predictions"]} == EXPECTED
    assert daemon_death["containers_after"].stdout.split() == []


# --- a daemon failure that passes -------------------------------------------------------------------------------


class FlakyDaemon:
    """The real daemon, whose first `failures` container starts fail the way the SDK reports a daemon error (an
    `APIError`, as a loaded daemon gives), after the container was created; every other call reaches the daemon."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
        import docker.errors
        from docker.models.containers import Container

        self.failures, self.starts = failures, 0
        real_start = Container.start

        def start(container: Any, *args: Any, **kwargs: Any) -> Any:
            self.starts += 1
            if self.starts <= self.failures:
                raise docker.errors.APIError(f"injected daemon failure {self.starts}")
            return real_start(container, *args, **kwargs)

        monkeypatch.setattr(Container, "start", start)


def leftovers(label: str) -> list[str]:
    done = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.asyncodebench.run_id={label}"],
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


def local_run(demo_dataset: DemoDataset, tmp_path: Path) -> tuple[Any, Any]:
    """A local executor opened on the demo task, and the gold prediction's job (probes off: one container)."""
    from asyncodebench.harness.evaluation import Settings
    from asyncodebench.run.config import RunConfig
    from asyncodebench.run.executors import LocalExecutor
    from asyncodebench.run.runner import prepare_run
    from asyncodebench.run.work import Job

    preds = tmp_path / "preds.jsonl"
    preds.write_bytes(jsonl([example_predictions()["demo-gold"]]))
    config = RunConfig(preds, str(demo_dataset.path), None, f"tries-{uuid.uuid4().hex[:6]}", tmp_path / "runs",
                       settings=Settings(timeout=60, run_probes=False))
    state = prepare_run(config)
    executor = LocalExecutor(config, state)
    assert executor.open({DEMO_TASK_ID}) is None
    (gold,) = state.file.predictions
    return executor, Job(state.specs[DEMO_TASK_ID], gold, config.settings, {}, None, config.label)


def evaluate_once(executor: Any, job: Any) -> Any:
    outcomes: list[Any] = []
    try:
        executor.evaluate([job], lambda _, outcome: outcomes.append(outcome))
    finally:
        executor.close()
    (outcome,) = outcomes
    return outcome


def retries_said(capsys: pytest.CaptureFixture[str], what: str) -> list[str]:
    """The attempts announced on stderr for `what`, as "trying again (attempt N of 3)"."""
    lines = capsys.readouterr().err.splitlines()
    return [line.rsplit("; ", 1)[-1] for line in lines if line.startswith(f"warning: {what}: ")]


@pytest.mark.parametrize("failures", [1, 2])
def test_a_daemon_failure_that_passes_is_tried_again_and_the_prediction_scored(
        demo_dataset: DemoDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], failures: int) -> None:
    executor, job = local_run(demo_dataset, tmp_path)
    daemon = FlakyDaemon(monkeypatch, failures)
    announced = [f"trying again (attempt {n} of 3)" for n in range(2, failures + 2)]
    baseline = executor.measure_baselines({DEMO_TASK_ID: {}})[DEMO_TASK_ID]
    assert not isinstance(baseline, str), baseline  # measured once the daemon answered
    assert daemon.starts == failures + 1
    assert retries_said(capsys, f"the base state of {DEMO_TASK_ID}") == announced
    daemon.failures, daemon.starts = failures, 0
    outcome = evaluate_once(executor, job)
    assert outcome.infrastructure_kind is None and outcome.result.to_json()["outcome"] == "passed", outcome.result
    assert daemon.starts == failures + 1
    assert retries_said(capsys, f"line 1 ({DEMO_TASK_ID})") == announced
    assert leftovers(job.label) == []  # not even the containers the daemon created but failed to start


def test_a_daemon_failure_that_lasts_ends_as_an_infrastructure_error_naming_every_attempt(
        demo_dataset: DemoDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from asyncodebench.run.work import TRIES

    executor, job = local_run(demo_dataset, tmp_path)
    daemon = FlakyDaemon(monkeypatch, 10 * TRIES)
    baseline = executor.measure_baselines({DEMO_TASK_ID: {}})[DEMO_TASK_ID]
    assert isinstance(baseline, str) and baseline.startswith(f"{TRIES} attempt(s) failed: ")
    assert [f"injected daemon failure {n}" in baseline for n in range(1, TRIES + 2)] == [True] * TRIES + [False]
    announced = [f"trying again (attempt {n} of {TRIES})" for n in range(2, TRIES + 1)]
    assert retries_said(capsys, f"the base state of {DEMO_TASK_ID}") == announced
    daemon.starts = 0
    outcome = evaluate_once(executor, job)
    assert outcome.result.status == "infrastructure_error" and outcome.evidence is None
    error = outcome.result.to_json()["infrastructure_error"]
    assert error["kind"] == "sandbox_unavailable" and error["message"].startswith(f"{TRIES} attempt(s) failed: ")
    assert daemon.starts == TRIES
    assert retries_said(capsys, f"line 1 ({DEMO_TASK_ID})") == announced
    assert leftovers(job.label) == []


@pytest.mark.docker
def test_a_container_the_oom_killer_emptied_is_the_evaluated_code_s_doing_a_removed_one_the_daemon_s(
        demo_dataset: DemoDataset) -> None:
    """Files written to the work tree (a tmpfs counted in the container's memory) past the memory limit make the
    kernel kill every process, init included: ending the processes then finds none, which is the evaluated code's
    outcome, not a daemon failure that would make the prediction an infrastructure error. A container that is gone
    for another reason still is one."""
    from asyncodebench.harness.sandbox import (
        Limits,
        Sandbox,
        SandboxUnavailableError,
        base_volume,
        docker_client,
        remove_run_containers,
    )

    client, run_id = docker_client(), f"oom-{uuid.uuid4().hex[:8]}"
    base = base_volume(client, demo_dataset.pinned_ref, run_id, "/testbed")
    try:
        with Sandbox(client, demo_dataset.pinned_ref, run_id, Limits(memory="64m", workspace="1g"), "/testbed", base,
                     "python3") as box:
            done = box.exec(["sh", "-c", "head -c 300m /dev/urandom > /testbed/fill"], 60)
            assert done.exit_code != 0
            box.end_processes()  # no process left to end: returns
            assert box.stopped_by_oom_killer()
        with Sandbox(client, demo_dataset.pinned_ref, run_id, Limits(memory="256m"), "/testbed", base,
                     "python3") as box:
            box.container.stop(timeout=0)
            assert not box.stopped_by_oom_killer()
            with pytest.raises(SandboxUnavailableError):
                box.end_processes()
    finally:
        remove_run_containers(client, run_id)
