"""The work done on a node: evaluate one prediction, or one task's base state, from plain inputs to a plain outcome.

Both executors call these functions (the local one in a thread, the Ray one in a Ray task), so a prediction is
evaluated by the same code wherever it runs. Nothing here touches the run folder: the driver alone writes it
(`store.save_outcome`). Inputs and outcomes are plain picklable values; an outcome's size is bounded by the
harness's own caps (the last megabyte of output, reports read through a 50 MB limit, probe output tails).
"""

from __future__ import annotations

import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from asyncodebench.harness import baseline
from asyncodebench.harness.baseline import BaseStateRecord
from asyncodebench.harness.evaluation import Evidence, Settings, State, Workbench, evaluate_patch
from asyncodebench.harness.integration import INTEGRATED_PROTOCOLS, plan_artifacts
from asyncodebench.harness.sandbox import SandboxUnavailableError
from asyncodebench.harness.spec import TaskSpec
from asyncodebench.images.digests import MATCH, MISMATCH, MISSING, UNREACHABLE, ImageStatus, local_status, pull
from asyncodebench.run.prediction_result import InfrastructureKind, PredictionResult
from asyncodebench.run.predictions import Prediction
from asyncodebench.run.results import infrastructure_result, score
from asyncodebench.scoring.patches import patch_bytes
from asyncodebench.untrusted import terminal_text


@dataclass(frozen=True)
class Job:
    """One prediction to evaluate, with everything the node needs and nothing it must look up."""

    spec: TaskSpec
    prediction: Prediction
    settings: Settings
    overlays: dict[str, bytes] | str  # verified overlay patches by path, or why they cannot be used
    baseline: BaseStateRecord | str | None  # the task's base-state record, or why it could not be measured
    label: str  # the run folder's container label


@dataclass(frozen=True)
class Outcome:
    """What the driver writes into the prediction's folder: its evidence (none for an infrastructure error) and its
    graded result."""

    result: PredictionResult
    evidence: Evidence | None = None

    @property
    def infrastructure_kind(self) -> str | None:
        """The infrastructure error's kind, or None for an evaluated result."""
        return self.result.failure.kind if self.result.failure else None


Record = Callable[[Job, Outcome], None]  # how an executor hands an outcome back to the driver, in its thread


TRIES = 3  # attempts of one piece of work that meets a daemon failure, on any executor, before it is recorded as one


def prediction_named(prediction: Prediction) -> str:
    """How messages name a prediction's work: `line 3 (task id)`."""
    return f"line {prediction.line} ({prediction.task_id})"


def base_state_named(task_id: str) -> str:
    """How messages name a task's base-state work."""
    return f"the base state of {task_id}"


def say_retry(what: str, failures: list[str]) -> None:
    """One line on stderr (above the progress bar) as work that met a daemon failure is tried again: a daemon that
    fails often is seen while the run goes on, not only in the results. The daemon's whole reason, on one line: its
    cause (no space left, an OCI runtime error) is often at the end of a long message."""
    from tqdm import tqdm

    tqdm.write(terminal_text(f"warning: {what}: {' '.join(failures[-1].split())}; trying again (attempt "
                             f"{len(failures) + 1} of {TRIES})"), file=sys.stderr)


def attempts_failed(failures: list[str]) -> str:
    """The message of work that failed every attempt: each failure in order, the same failure said once."""
    return f"{len(failures)} attempt(s) failed: " + " | ".join(dict.fromkeys(failures))


def evaluate_prediction(client: Any, job: Job, image: ImageStatus,
                        stopping: threading.Event | None = None) -> Outcome | None:
    """Evaluate and grade one prediction on this node's daemon (`image`: its pinned image as found there).

    Returns None when `stopping` was set meanwhile (Ctrl-C): interrupted work records nothing and is redone on
    resume. Causes outside the container become infrastructure results, never scores.
    """
    spec, prediction = job.spec, job.prediction
    if image.state != MATCH:
        what = f"image {spec.pinned_ref} is {image.state}: {image.detail or 'see scripts/check_images.py'}"
        return Outcome(infrastructure_result(prediction, image_failure_kind(image), what))
    if isinstance(job.overlays, str):
        return Outcome(infrastructure_result(prediction, "overlay_missing", job.overlays))
    if isinstance(job.baseline, str):
        return Outcome(infrastructure_result(prediction, "baseline_unavailable", job.baseline))
    final_patch, states, agents = work_of(spec, prediction)
    if stopping is not None and stopping.is_set():
        return None
    try:
        evidence = evaluate_patch(client, spec, final_patch, job.label, job.settings, job.overlays, states, agents)
    except SandboxUnavailableError as exc:
        if stopping is not None and stopping.is_set():  # an interrupted evaluation is simply redone on resume
            return None
        return Outcome(infrastructure_result(prediction, "sandbox_unavailable", str(exc)))
    except Exception:  # a harness bug must not sink the other predictions, nor pass as a model failure
        return Outcome(infrastructure_result(prediction, "harness_error", traceback.format_exc()[-4000:]))
    if stopping is not None and stopping.is_set():
        return None
    floor = job.baseline.floor(spec) if job.baseline else None
    return Outcome(score(spec, prediction, evidence, floor, probes_ran=job.settings.run_probes), evidence)


def measure_baseline(client: Any, spec: TaskSpec, label: str, settings: Settings,
                     overlays: dict[str, bytes]) -> BaseStateRecord | str:
    """The task's base-state record (decision 9) measured on this node's daemon, or why it could not be."""
    try:
        return baseline.measure(Workbench.open(client, spec, label, settings, overlays))
    except SandboxUnavailableError as exc:
        return f"the base state could not be evaluated: {exc}"


def work_of(spec: TaskSpec, prediction: Prediction) -> tuple[bytes, tuple[State, ...], Any]:
    """What to evaluate: the final patch, the intermediate states to replay, and agent artifacts to integrate.

    A trailing `final_integrated` checkpoint is the final state itself; agent patches of the integrated protocols
    are merged by the harness, whose result replaces the final patch and the states.
    """
    checkpoints = list(prediction.checkpoints)
    final_patch = prediction.model_patch
    if checkpoints and checkpoints[-1].checkpoint_type == "final_integrated":
        final_patch = checkpoints.pop().patch or ""
    states = tuple(State(c.checkpoint_type, c.workspace_kind, c.agent_id, patch_bytes(c.patch)) for c in checkpoints)
    agents = None
    if prediction.agent_patches and prediction.protocol in INTEGRATED_PROTOCOLS:
        patches = {a: patch_bytes(p) for a, p in prediction.agent_patches.items() if p}
        agents = (prediction.protocol, plan_artifacts(spec, patches))
    return patch_bytes(final_patch), states, agents


def check_image(client: Any, spec: Any, allow_pull: bool) -> ImageStatus:
    """The task's pinned image on this daemon, pulled by digest when missing and allowed."""
    try:
        status = local_status(client, spec.task_id, spec.image, spec.pinned_ref)
        if status.state != MATCH and allow_pull:
            status = pull(client, spec.task_id, spec.image, spec.pinned_ref)
    except Exception as exc:  # the daemon went away after the ping: an infrastructure failure, reported
        status = ImageStatus(spec.task_id, spec.pinned_ref, UNREACHABLE, (), f"the Docker daemon failed: {exc}")
    return status


IMAGE_FAILURES: dict[str, InfrastructureKind] = {MISSING: "image_missing", MISMATCH: "image_mismatch",
                                                 UNREACHABLE: "image_unreachable"}


def image_failure_kind(image: ImageStatus) -> InfrastructureKind:
    """The infrastructure error of a pinned image found in a state other than `match`."""
    return IMAGE_FAILURES[image.state]
