"""Whether a finished run is a complete, official run of a published release, so its numbers may stand as the
benchmark's: every release task scored under each protocol published, on the release's own rows and images, with the
official limits.

The release is read from the Hub (or the mirror in HF_ENDPOINT) at its commit: its Parquet files give the scenarios
(task x protocol), each task's pinned image and a content digest that a run on a local folder is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asyncodebench.dataset.rows import HUB, LOCAL, load_published

OFFICIAL_SETTINGS = {"run_probes": True, "timeout_seconds": 900, "probe_timeout_seconds": 60}
PARQUET_PATTERN = "data/*/test-*.parquet"


class ReleaseNotFoundError(LookupError):
    """The Hub has no such dataset or commit: a bad argument."""


class ReleaseUnavailableError(RuntimeError):
    """The Hub (HF_ENDPOINT) could not be reached to read the release: an infrastructure failure."""


@dataclass(frozen=True)
class Release:
    """What a complete run of the release at `commit` must match."""

    dataset_id: str
    commit: str
    content_sha256: str  # over the Parquet files, as `rows.load_published` digests a local folder
    scenarios: frozenset[tuple[str, str]]  # (task_id, protocol)
    pinned_refs: dict[str, str]  # task_id -> image@sha256:...

    def tasks_of(self, protocol: str) -> set[str]:
        """The release's tasks that have a scenario under `protocol`."""
        return {task for task, p in self.scenarios if p == protocol}


def fetch_release(dataset_id: str, commit: str) -> Release:
    """The release's rows at `commit`, downloaded into the Hugging Face cache (Parquet files only)."""
    from huggingface_hub import HfApi, constants, snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    # One quick request first: when the Hub gives no answer at all, only the cache is read (a commit downloaded
    # before is still found, as huggingface_hub does offline), where snapshot_download would retry its file listing
    # for half a minute before reading the cache.
    no_answer: Exception | None = None
    try:
        HfApi().dataset_info(dataset_id, revision=commit)
    except HfHubHTTPError:  # it answered: snapshot_download below meets the same answer and it is mapped there
        pass
    except Exception as exc:  # the HTTP client's or the OS's: nothing answered
        no_answer = exc
    try:
        folder = snapshot_download(dataset_id, repo_type="dataset", revision=commit, allow_patterns=[PARQUET_PATTERN],
                                   local_files_only=no_answer is not None)
    except Exception as exc:  # the HTTP client's, the Hub's or the OS's
        exc = no_answer or exc  # why the Hub could not be read, not that the cache lacks the commit
        # The Hub answers an unknown commit with RevisionNotFoundError; a mirror may answer its file tree with "entry
        # not found", which snapshot_download hands on as the cause of a cache miss.
        if isinstance(exc, RevisionNotFoundError) or isinstance(exc.__cause__, RemoteEntryNotFoundError):
            raise ReleaseNotFoundError(f"the Hub dataset {dataset_id} has no commit {commit}: give the commit the "
                                       "release was published at (its tag's commit in the dataset's history)"
                                       ) from None
        if isinstance(exc, RepositoryNotFoundError):
            raise ReleaseNotFoundError(f"there is no Hub dataset {dataset_id} at {constants.ENDPOINT}") from None
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ReleaseUnavailableError(f"could not read {dataset_id}@{commit} from the Hub at {constants.ENDPOINT} "
                                      f"to check the run against it ({cause}); check HF_ENDPOINT and the network, "
                                      "then rerun") from None
    try:
        published = load_published(folder)
    except FileNotFoundError as exc:
        raise ReleaseNotFoundError(f"{dataset_id}@{commit} is no AsynCodeBench release ({exc})") from None
    return Release(dataset_id, commit, published.content_digest or "",
                   frozenset((s["task_id"], s["protocol"]) for s in published.rows.scenarios),
                   {t["task_id"]: t["container_pinned_ref"] for t in published.rows.tasks})


def run_problems(report: dict[str, Any], model: str, protocols: list[str], release: Release) -> list[str]:
    """Why the model's results under `protocols` are not a complete, official run of `release` (empty: they are);
    each reason says what to run to complete it."""
    run = report["run"]
    redo = (f"python scripts/evaluate.py PREDICTIONS --dataset {release.dataset_id} --revision {release.commit} "
            "--run-id NEW_RUN_ID")
    problems = _dataset_problems(run["dataset"], release, redo)
    settings = run.get("settings") or {}
    changed = [f"{key}={settings.get(key)!r} (official: {value!r})" for key, value in OFFICIAL_SETTINGS.items()
               if settings.get(key) != value]
    if changed:
        problems.append(f"the run did not use the official settings ({', '.join(changed)}): rerun without "
                        f"--timeout, --probe-timeout or --no-probes: {redo}")
    predictions = [p for p in report["predictions"] if p["model_name_or_path"] == model]
    for protocol in protocols:
        mine = [p for p in predictions if p["protocol"] == protocol]
        scored = {p["task_id"] for p in mine if p["status"] == "evaluated"}
        errors = sorted({p["task_id"] for p in mine if p["status"] == "infrastructure_error"})
        missing = sorted(release.tasks_of(protocol) - scored - set(errors))
        extra = sorted({p["task_id"] for p in mine} - release.tasks_of(protocol))
        if errors:
            problems.append(f"{protocol}: {len(errors)} task(s) ended in an infrastructure error ({_few(errors)}): "
                            f"fix the cause (report.md names it) and rerun the same run id: python scripts/"
                            f"evaluate.py PREDICTIONS --run-id {run['run_id']}")
        if missing:
            problems.append(f"{protocol}: {len(missing)} of the release's {len(release.tasks_of(protocol))} tasks "
                            f"were not scored ({_few(missing)}): add a prediction for each to the predictions "
                            f"file and run it whole: {redo}")
        if extra:
            problems.append(f"{protocol}: {len(extra)} scored task(s) are not in the release ({_few(extra)}): "
                            f"score the release's tasks only: {redo}")
    problems += _image_problems(run, predictions, release, redo)
    return problems


def _dataset_problems(dataset: dict[str, Any], release: Release, redo: str) -> list[str]:
    if dataset["source"] == HUB:
        if dataset.get("resolved_commit") is None:
            return [f"the run loaded the rows offline from the Hugging Face cache, so no commit says which rows "
                    f"they were: rerun online: {redo}"]
        if dataset["resolved_commit"] != release.commit or dataset["id"] != release.dataset_id:
            return [f"the run scored {dataset['id']}@{dataset['resolved_commit']}, not {release.dataset_id}@"
                    f"{release.commit}: publish it for the commit it ran, or rerun: {redo}"]
        return []
    if dataset["source"] == LOCAL and dataset.get("content_sha256") != release.content_sha256:
        return [f"the run's local rows (content {dataset.get('content_sha256')}) are not the rows of "
                f"{release.dataset_id}@{release.commit} (content {release.content_sha256}): rerun on the Hub's "
                f"rows: {redo}"]
    return []


def _image_problems(run: dict[str, Any], predictions: list[dict[str, Any]], release: Release,
                    redo: str) -> list[str]:
    tasks = {p["task_id"] for p in predictions}
    images = {info["task_id"]: info for info in (run.get("images") or {}).values()}
    wrong = sorted(t for t in tasks & release.pinned_refs.keys()
                   if (images.get(t) or {}).get("pinned_ref") != release.pinned_refs[t]
                   or (images.get(t) or {}).get("state") != "match")
    rebuilt = sorted({p["task_id"] for p in predictions if p.get("image_provenance", "official") != "official"})
    problems = []
    if wrong:
        problems.append(f"{len(wrong)} task(s) did not run on the release's pinned image ({_few(wrong)}): pull "
                        f"the images by digest and rerun: {redo} --pull")
    if rebuilt:
        problems.append(f"{len(rebuilt)} task(s) ran on rebuilt images (--images; {_few(rebuilt)}): rerun on the "
                        f"official ones, without --images: {redo}")
    return problems


def _few(names: list[str], shown: int = 5) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
