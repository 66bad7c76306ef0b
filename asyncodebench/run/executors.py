"""Where predictions are evaluated: the executors the driver (`runner`) hands its jobs to.

Every executor runs the same node-side code (`work.evaluate_prediction`, `work.measure_baseline`) and hands each
outcome back to the driver through `record`, in the driver's thread; the driver alone writes the run folder. They
differ only in where the work runs:

- `LocalExecutor`: this machine's Docker daemon, `--max-workers` predictions at once in threads; work that meets a
  daemon failure (a container that would not start, run or freeze, as happens on a loaded machine) is tried again
  there, `work.TRIES` attempts in all, as the Ray executor tries it on other nodes;
- `ray_executor.RayExecutor`: one Ray task per prediction on the nodes of a Ray cluster (`--executor ray`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from typing import Any, Callable, Protocol, TypeVar

from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.sandbox import (
    INTERRUPT_SETTLE_SECONDS,
    SandboxUnavailableError,
    docker_client,
    remove_run_containers,
)
from asyncodebench.images.digests import MATCH, ImageStatus
from asyncodebench.run.config import RunConfig, RunState
from asyncodebench.run.prediction_result import InfrastructureKind
from asyncodebench.run.work import (
    TRIES,
    Job,
    Outcome,
    Record,
    attempts_failed,
    base_state_named,
    check_image,
    evaluate_prediction,
    measure_baseline,
    prediction_named,
    say_retry,
)

T = TypeVar("T")


class Executor(Protocol):
    """Where a run's predictions are evaluated: this machine's Docker daemon, or the nodes of a Ray cluster."""

    def open(self, task_ids: set[str]) -> tuple[InfrastructureKind, str] | None:
        """Get ready to evaluate these tasks; (infrastructure error kind, message) when nothing can run."""

    def measure_baselines(self, overlays: dict[str, dict[str, bytes]]) -> dict[str, BaseStateRecord | str]:
        """Each task's base-state record (or why it could not be measured); tasks that cannot run are left out."""

    def evaluate(self, jobs: list[Job], record: Record) -> None:
        """Evaluate every job, calling `record` in this thread for each outcome; on Ctrl-C stop the work, remove
        its containers and raise KeyboardInterrupt."""

    def close(self) -> None:
        """Release what the run used (its volumes), unless it was interrupted."""


def open_executor(config: RunConfig, state: RunState) -> Executor:
    """The executor `config.executor` names: a Ray cluster's (Ray is imported only then) or this machine's."""
    if config.executor == "ray":
        from asyncodebench.run.ray_executor import RayExecutor  # lazy: Ray is an optional extra

        return RayExecutor(config, state)
    return LocalExecutor(config, state)


class LocalExecutor:
    """The executor of this machine's Docker daemon; images are checked once, up front."""

    def __init__(self, config: RunConfig, state: RunState) -> None:
        self.config, self.state = config, state
        self.client: Any = None

    def open(self, task_ids: set[str]) -> tuple[InfrastructureKind, str] | None:
        """See `Executor.open`: connect to the daemon, remove this run's leftover containers, check the images."""
        try:
            self.client = docker_client()
        except SandboxUnavailableError as exc:
            return "docker_unavailable", str(exc)
        remove_run_containers(self.client, self.config.label)  # leftovers of an interrupted run of this folder
        self.state.images.update({t: check_image(self.client, self.state.specs[t], self.config.pull)
                                  for t in sorted(task_ids)})
        return None

    def measure_baselines(self, overlays: dict[str, dict[str, bytes]]) -> dict[str, BaseStateRecord | str]:
        """See `Executor.measure_baselines`: the tasks whose image matches its pin, one after another (in this
        thread, so Ctrl-C or SIGTERM may land in the middle of making a container: then the run's are removed)."""
        try:
            return {task_id: self._measure_baseline(task_id, task_overlays)
                    for task_id, task_overlays in sorted(overlays.items())
                    if self.state.images[task_id].state == MATCH}
        except KeyboardInterrupt:
            self._stop()
            raise

    def _measure_baseline(self, task_id: str, overlays: dict[str, bytes]) -> BaseStateRecord | str:
        record, failures = with_tries(
            lambda: measure_baseline(self.client, self.state.specs[task_id], self.config.label, self.config.settings,
                                     overlays),
            _failure_of, base_state_named(task_id))
        return attempts_failed(failures) if isinstance(record, str) else record

    def evaluate(self, jobs: list[Job], record: Record) -> None:
        """See `Executor.evaluate`: `max_workers` jobs at once (one by default), each in a thread of this process."""
        stopping = self.state.stopping
        with ThreadPoolExecutor(max_workers=self.config.max_workers or 1) as pool:
            futures = {pool.submit(evaluate_with_tries, self.client, job,
                                   self.state.images[job.spec.task_id], stopping): job for job in jobs}
            try:
                for future in as_completed(futures):
                    outcome = future.result()
                    if outcome is not None:
                        record(futures[future], outcome)
            except KeyboardInterrupt:
                for future in futures:
                    future.cancel()
                self._stop()  # running evaluations fail fast, record nothing
                raise

    def _stop(self) -> None:
        """On Ctrl-C or SIGTERM: record nothing more, and remove the run's containers."""
        self.state.stopping.set()
        remove_run_containers(self.client, self.config.label, INTERRUPT_SETTLE_SECONDS)

    def close(self) -> None:
        """See `Executor.close`: remove any container or volume of the run left behind."""
        if self.client is not None and not self.state.stopping.is_set():
            try:  # every step removes its own container; a start the daemon failed may leave one created
                remove_run_containers(self.client, self.config.label)
            except Exception:  # the daemon went away; the next run of this id removes them
                pass


def evaluate_with_tries(client: Any, job: Job, image: ImageStatus, stopping: Any) -> Outcome | None:
    """`evaluate_prediction`, tried again while the daemon fails (`sandbox_unavailable`)."""
    def daemon_failure(outcome: Outcome | None) -> str | None:
        if outcome is None or outcome.infrastructure_kind != "sandbox_unavailable":
            return None
        return outcome.result.failure.message if outcome.result.failure else None

    outcome, failures = with_tries(lambda: evaluate_prediction(client, job, image, stopping), daemon_failure,
                                   prediction_named(job.prediction))
    if outcome is not None and daemon_failure(outcome):
        outcome = replace(outcome, result=outcome.result.with_failure_message(attempts_failed(failures)))
    return outcome


def with_tries(attempt: Callable[[], T], failure: Callable[[T], str | None], what: str) -> tuple[T, list[str]]:
    """Run `attempt` until `failure` finds no daemon failure in its result, TRIES attempts at most, announcing each
    retry: such a failure is not the work's doing and often passes, and each attempt starts from new containers.
    Returns the last result and the failures met."""
    failures: list[str] = []
    while True:
        result = attempt()
        problem = failure(result)
        if problem is None:
            return result, failures
        failures.append(problem)
        if len(failures) == TRIES:
            return result, failures
        say_retry(what, failures)


def _failure_of(record: BaseStateRecord | str) -> str | None:
    """A base-state measurement's daemon failure: the reason it gives instead of a record."""
    return record if isinstance(record, str) else None
