"""A finished run as a model repo's Hub Eval Results: one `.eval_results/asyncodebench_<protocol>.yaml` per protocol.

Format: https://huggingface.co/docs/hub/eval-results. Each file holds one result, the protocol's final success rate
(FSR) in percent for the task of `eval.yaml` named after the protocol, with the dataset's commit as its revision and,
in `notes`, the kit version, the run id and a digest of the images the run used (the files carry only documented
fields, so the Hub's validation accepts them). Every image's pinned reference is in a provenance JSON beside them,
which `source.url` links to.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import jsonschema
import yaml
from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

from asyncodebench.dataset.protocols import PROTOCOLS
from asyncodebench.reports.release import Release, run_problems
from asyncodebench.scoring.trust import TRUST_STATUSES

ROOT = Path(__file__).resolve().parents[2]
EVAL_YAML = ROOT / "eval.yaml"
SCHEMA = ROOT / "schemas" / "eval_results.schema.json"
REPORT_SCHEMA = ROOT / "schemas" / "report.schema.json"
REVIEW_SCHEMA = ROOT / "schemas" / "review_clearance.schema.json"
RESULTS_FOLDER = ".eval_results"
PROVENANCE_FOLDER = "asyncodebench_runs"  # outside .eval_results, whose every file the Hub parses as results
FRAMEWORK = "asyncodebench"
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


class ResultsError(ValueError):
    """The run or the arguments cannot make results; the message says what to do."""


@dataclass(frozen=True)
class ResultsFile:
    """One file for the model repo: its path in the repo and its text."""

    path: str
    text: str


def load_finished_report(run_dir: Path) -> dict[str, Any]:
    """The run's report.json, checked against its schema; refused when the folder is no run or the run is unfinished."""
    if not run_dir.is_dir():
        raise ResultsError(f"{run_dir} is not a folder: give a run folder that scripts/evaluate.py wrote "
                           "(runs/<run id>/)")
    report_path = run_dir / "report.json"
    if not report_path.is_file():
        if (run_dir / "settings.json").is_file() or (run_dir / "predictions").is_dir():
            raise ResultsError(f"{run_dir} has no report.json: the run has not finished; rerun "
                               "`python scripts/evaluate.py PREDICTIONS --run-id <its run id>` to finish it")
        raise ResultsError(f"{run_dir} is not a run folder (no report.json): give the folder scripts/evaluate.py "
                           "wrote (runs/<run id>/)")
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
        schema = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
        jsonschema.validate(report, schema)
    except OSError as exc:
        raise ResultsError(f"cannot read {report_path} ({exc.strerror or exc}): give a run folder you can read") \
            from exc
    except (UnicodeDecodeError, json.JSONDecodeError, jsonschema.ValidationError) as exc:
        raise ResultsError(f"{report_path} is not a valid run report ({str(exc).splitlines()[0]}); rerun "
                           "`python scripts/evaluate.py PREDICTIONS --run-id <its run id> --rescore` to rewrite it"
                           ) from exc
    left = report["counts"]["not_evaluated"]
    if left:
        raise ResultsError(f"{run_dir}: {left} predictions were not evaluated, the run is unfinished; rerun "
                           "`python scripts/evaluate.py PREDICTIONS --run-id <its run id>` to finish it")
    return report


def eval_yaml_tasks(path: Path = EVAL_YAML) -> list[str]:
    """The task ids the benchmark's eval.yaml declares."""
    return [task["id"] for task in yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]]


def pick_model(report: dict[str, Any], model: str | None) -> str:
    """The run's one model, or the one asked for; a run with several needs `--model`."""
    models = sorted({row["model_name_or_path"] for row in report["summary"]})
    if model is None:
        if len(models) != 1:
            raise ResultsError(f"the run holds {len(models)} models ({', '.join(models)}): choose one with --model")
        return models[0]
    if model not in models:
        raise ResultsError(f"the run has no model {model!r}; it holds: {', '.join(models)}")
    return model


def dataset_ref(report: dict[str, Any], dataset_id: str | None, revision: str | None) -> tuple[str, str]:
    """The Hub dataset and the commit the results are for: the run's own, or the ones given for a local folder."""
    dataset = report["run"]["dataset"]
    if dataset["source"] == "hub":
        dataset_id = dataset_id or dataset["id"]
        revision = revision or dataset["resolved_commit"]
    if not dataset_id or not revision:
        where = dataset.get("id")
        raise ResultsError(f"the run read the dataset from {where} without a Hub commit: pass --dataset and "
                           "--revision (the 40-hex commit of the published revision those rows are)")
    if not REPO_ID.match(dataset_id):
        raise ResultsError(f"--dataset {dataset_id!r} is not a Hub id: give it as ORG/NAME")
    if not COMMIT.match(revision):
        raise ResultsError(f"dataset revision {revision!r} is not a commit hash: give the 40-hex commit "
                           "(a tag such as v0.4.2 can move)")
    return dataset_id, revision


def image_digest(images: dict[str, Any]) -> str:
    """A short digest over every task's pinned image reference, so a results line names its exact image set."""
    lines = sorted(f"{info['task_id']} {info['pinned_ref']}\n" for info in images.values())
    return hashlib.sha256("".join(lines).encode()).hexdigest()[:16]


def load_review_file(path: Path) -> dict[str, Any]:
    """A review file (schemas/review_clearance.schema.json): who cleared which `needs_review` result, when, why."""
    try:
        review = json.loads(path.read_text(encoding="utf-8"))
        jsonschema.validate(review, json.loads(REVIEW_SCHEMA.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ResultsError(f"cannot read the review file {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, jsonschema.ValidationError) as exc:
        raise ResultsError(f"{path} is not a valid review file ({str(exc).splitlines()[0]}); see "
                           "schemas/review_clearance.schema.json and docs/evaluate.md") from exc
    return dict(review)


def cleared_results(report: dict[str, Any], model: str, review: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The review file's entries for the model's `needs_review` results; refused while one is not cleared, when the
    file is for another run or names a result the run does not have, or when the report predates trust statuses."""
    predictions = [p for p in report["predictions"]
                   if p["model_name_or_path"] == model and p["status"] == "evaluated"]
    if any("trust_status" not in p for p in predictions):
        raise ResultsError("the run's report predates trust statuses: rerun `python scripts/evaluate.py "
                           "PREDICTIONS --run-id <its run id> --rescore` to record them, then publish")
    entries = list((review or {}).get("cleared") or [])
    if review is not None and review.get("run_id") != report["run"]["run_id"]:
        raise ResultsError(f"the review file is for run {review.get('run_id')!r}, not {report['run']['run_id']!r}")
    by_key = {(p["line"], p["task_id"], p["protocol"]): p for p in report["predictions"]}
    unknown = [e for e in entries if (e["line"], e["task_id"], e["protocol"]) not in by_key]
    if unknown:
        e = unknown[0]
        raise ResultsError(f"the review file clears line {e['line']} ({e['task_id']}, {e['protocol']}), which this "
                           "run does not have: check the line, task and protocol against report.json")
    cleared = {(e["line"], e["task_id"], e["protocol"]) for e in entries}
    pending = [p for p in predictions if p["trust_status"] == "needs_review"
               and (p["line"], p["task_id"], p["protocol"]) not in cleared]
    if pending:
        named = ", ".join(f"line {p['line']} ({p['task_id']}, {p['protocol']})" for p in pending[:10])
        raise ResultsError(f"{model} has {len(pending)} result(s) that need review before publishing: {named}"
                           f"{' ...' if len(pending) > 10 else ''}. Read their review flags (report.md, result.json), "
                           "then name each one you clear in a review file (who, when, why; "
                           "schemas/review_clearance.schema.json) and pass it with --review-file")
    mine = {(p["line"], p["task_id"], p["protocol"]) for p in predictions}
    return [e for e in entries if (e["line"], e["task_id"], e["protocol"]) in mine]


def publication_problems(report: dict[str, Any], model: str, release: Release) -> list[str]:
    """Why the model's results in the run may not be published as the benchmark's (empty: they may): see
    `release.run_problems`, over every protocol the model ran."""
    protocols = sorted({row["protocol"] for row in report["summary"] if row["model_name_or_path"] == model},
                       key=lambda p: PROTOCOLS.index(p) if p in PROTOCOLS else len(PROTOCOLS))
    return run_problems(report, model, protocols, release)


def source_url(endpoint: str, model_repo: str, revision: str, path: str) -> str:
    """Where a file of the model repo is shown at `revision`: `main`, or `refs/pr/N` for a pull request (the Hub
    spells the ref with its slashes escaped)."""
    return f"{endpoint.rstrip('/')}/{model_repo}/blob/{quote(revision, safe='')}/{path}"


def build_files(report: dict[str, Any], model_repo: str, endpoint: str, *, model: str | None = None,
                dataset_id: str | None = None, revision: str | None = None,
                eval_yaml: Path = EVAL_YAML, review: dict[str, Any] | None = None,
                repo_revision: str = "main") -> list[ResultsFile]:
    """The model repo's results files (one per protocol the model ran) and the run's provenance file; with a review
    file, the entries clearing the model's `needs_review` results go into the provenance and beside it.
    `repo_revision` is where the files will be in the model repo (`refs/pr/N` for a pull request), so `source.url`
    points where the provenance is. Whether the run may be published is `publication_problems`' answer, not this."""
    if not REPO_ID.match(model_repo or ""):
        raise ResultsError(f"--model-repo {model_repo!r} is not a Hub model id: give it as ORG/NAME")
    model = pick_model(report, model)
    dataset_id, revision = dataset_ref(report, dataset_id, revision)
    run = report["run"]
    rows = [row for row in report["summary"] if row["model_name_or_path"] == model]
    cleared = cleared_results(report, model, review)
    tasks = set(eval_yaml_tasks(eval_yaml))
    images = run["images"]
    provenance_path = f"{PROVENANCE_FOLDER}/{run['run_id']}.json"
    url = source_url(endpoint, model_repo, repo_revision, provenance_path)
    files = []
    for row in sorted(rows, key=lambda r: PROTOCOLS.index(r["protocol"]) if r["protocol"] in PROTOCOLS else 99):
        if row["protocol"] not in tasks:
            raise ResultsError(f"protocol {row['protocol']!r} is no task of eval.yaml ({', '.join(sorted(tasks))})")
        fsr = row["fsr"]["mean"]
        if fsr is None:
            continue  # nothing scored under this protocol: no leaderboard value to give
        entry = EvalResultEntry(
            dataset_id=dataset_id, task_id=row["protocol"], value=round(fsr * 100, 2), dataset_revision=revision,
            date=run["finished_at"][:10], source_url=url, source_name="AsynCodeBench run provenance",
            notes=(f"FSR % over {row['tasks']} tasks; AsynCodeBench kit {run['tool']['version']}; "
                   f"run {run['run_id']}; images sha256:{image_digest(images)}"))
        files.append(ResultsFile(f"{RESULTS_FOLDER}/{FRAMEWORK}_{row['protocol']}.yaml", dump_results([entry])))
    if not files:
        raise ResultsError(f"{model} has no scored protocol in this run: nothing to publish")
    dataset = run["dataset"]
    provenance = {
        "model_name_or_path": model, "run_id": run["run_id"],
        "kit": {k: run["tool"].get(k) for k in ("name", "version", "python")},
        # Where the rows came from, without the run's own paths: a local folder is named only by its content.
        "dataset": {"source": dataset["source"], "id": dataset_id, "revision": revision,
                    "content_sha256": dataset.get("content_sha256")},
        "finished_at": run["finished_at"], "image_set_sha256": image_digest(images),
        "images": {info["task_id"]: info["pinned_ref"] for info in images.values()},
        "summary": rows,
        "trust": {status: sum(p.get("trust_status") == status for p in report["predictions"]
                              if p["model_name_or_path"] == model) for status in TRUST_STATUSES},
        "review_cleared": cleared,
    }
    files.append(ResultsFile(provenance_path, json.dumps(provenance, indent=2, sort_keys=True) + "\n"))
    if cleared:
        review_path = f"{PROVENANCE_FOLDER}/{run['run_id']}.review.json"
        files.append(ResultsFile(review_path, json.dumps({"run_id": run["run_id"], "cleared": cleared}, indent=2,
                                                         sort_keys=True) + "\n"))
    return files


def dump_results(entries: list[EvalResultEntry]) -> str:
    """The YAML text of a results file, as huggingface_hub writes the format, checked against
    schemas/eval_results.schema.json first."""
    data = eval_result_entries_to_yaml(entries)
    validate_results(data)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def validate_results(entries: Any) -> None:
    """Raise ResultsError naming the first problem when `entries` is not a valid results file."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    try:
        jsonschema.validate(entries, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise ResultsError(f"results file invalid at {where}: {exc.message}") from exc


def write_files(files: list[ResultsFile], out_dir: Path) -> None:
    """Write the files under `out_dir` (a checkout of the model repo)."""
    for f in files:
        target = out_dir / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f.text, encoding="utf-8")


def push(files_at: Callable[[str], list[ResultsFile]], model_repo: str, token: str, create_pr: bool) -> str:
    """Commit the files to the model repo and return the commit's (or the pull request's) URL. `files_at` builds
    them for the revision they will be at: for a pull request, the pull request is opened first, so `source.url`
    names its ref (`refs/pr/N`), which still shows the files once it is merged."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    message = "Add AsynCodeBench evaluation results"

    def operations(revision: str) -> list[CommitOperationAdd]:
        return [CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.text.encode()) for f in files_at(revision)]

    if not create_pr:
        return api.create_commit(repo_id=model_repo, repo_type="model", operations=operations("main"),
                                 commit_message=message).commit_url
    pr = api.create_pull_request(repo_id=model_repo, repo_type="model", title=message,
                                 description="Results written by AsynCodeBench's scripts/publish_results.py.")
    ref = f"refs/pr/{pr.num}"
    api.create_commit(repo_id=model_repo, repo_type="model", operations=operations(ref), commit_message=message,
                      revision=ref)
    return str(pr.url)
