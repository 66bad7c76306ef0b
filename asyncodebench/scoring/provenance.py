"""Where a multi-agent prediction's checkpoint timeline comes from (issue 27, item 7), so that DRS, DRE, CAIL and the
SAD proxy of a timeline nobody can check are labelled as such.

- `harness`: the line gives `agent_patches`; the harness integrated them in the protocol's order and made the
  checkpoints itself. Nothing of the order is the submitter's.
- `recorded`: the line gives its own `checkpoints` with the agent runner's hash chain (`runner.timeline`, written by
  `scripts/run_agents.py`), and the chain checks out: one link per checkpoint, in order, each holding the SHA-256 of
  that checkpoint's patch and of the trajectory files of its agent, each link the SHA-256 of the one before and its
  own entry; the trajectory files are there, beside the predictions file, with those hashes.
- `self_reported`: the line gives its own `checkpoints` and no chain, or one that does not check out (`reason` says
  where it breaks). Its metrics are computed as for any timeline and labelled.

What `recorded` proves: the checkpoints are the ones the runner wrote next to those trajectories, unedited since.
It does not prove who ran the runner: anyone can compute a chain, so a submitter who fabricates a whole run
(trajectories included) gets `recorded` too; the trajectories are then there for anyone to read, which is what
the label promises. A chain keyed by a secret would need a trusted runner, which a submitted prediction has not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

GENESIS = "0" * 64  # the link before the first
TimelineSource = Literal["harness", "recorded", "self_reported"]


@dataclass(frozen=True)
class Timeline:
    """A prediction's timeline source and, for `self_reported`, why."""

    source: TimelineSource
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """`result.json`'s `timeline`."""
        return {"source": self.source, "reason": self.reason}


def sha256(data: bytes) -> str:
    """The hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def link(previous: str, entry: Mapping[str, Any]) -> str:
    """The chain's link for `entry` (its fields without `link`) after `previous`."""
    body = json.dumps({k: v for k, v in entry.items() if k != "link"}, sort_keys=True, separators=(",", ":"))
    return sha256((previous + body).encode())


def chain(checkpoints: Sequence[Mapping[str, Any]], trajectories: Mapping[str | None, Sequence[tuple[str, bytes]]]
          ) -> list[dict[str, Any]]:
    """The hash chain over `checkpoints` (the prediction's shape: `checkpoint_type`, `agent_id`, `patch`), each
    entry tied to its agent's trajectory files (`trajectories[agent_id]`: (path as the line lists it, content))."""
    entries: list[dict[str, Any]] = []
    previous = GENESIS
    for index, checkpoint in enumerate(checkpoints):
        agent = checkpoint.get("agent_id")
        entry: dict[str, Any] = {
            "index": index, "checkpoint_type": checkpoint.get("checkpoint_type"), "agent_id": agent,
            "patch_sha256": sha256(str(checkpoint.get("patch") or "").encode("utf-8", "surrogateescape")),
            "trajectories": [{"path": path, "sha256": sha256(data)} for path, data in trajectories.get(agent, ())]}
        entry["link"] = previous = link(previous, entry)
        entries.append(entry)
    return entries


def timeline_of(checkpoints: Sequence[Mapping[str, Any]], has_agent_patches: bool, recorded_chain: Any,
                read: Callable[[str], bytes | None]) -> Timeline | None:
    """The timeline source of a prediction: None when it has no multi-agent timeline (a single patch).
    `read(path)` gives a trajectory file's bytes by the path the chain names, or None when it is not there (or
    outside the predictions file's folder)."""
    if has_agent_patches:
        return Timeline("harness")
    if not checkpoints:
        return None
    problem = _chain_problem(checkpoints, recorded_chain, read)
    return Timeline("self_reported", problem) if problem else Timeline("recorded")


def _chain_problem(checkpoints: Sequence[Mapping[str, Any]], recorded: Any,
                   read: Callable[[str], bytes | None]) -> str | None:
    if not isinstance(recorded, list) or not recorded:
        return "the line carries no runner.timeline hash chain"
    if len(recorded) != len(checkpoints):
        return f"the chain has {len(recorded)} links for {len(checkpoints)} checkpoints"
    previous = GENESIS
    for index, (entry, checkpoint) in enumerate(zip(recorded, checkpoints)):
        if not isinstance(entry, dict) or entry.get("link") != link(previous, entry):
            return f"link {index} does not follow from the one before"
        expected_patch = sha256(str(checkpoint.get("patch") or "").encode("utf-8", "surrogateescape"))
        if (entry.get("index"), entry.get("checkpoint_type"), entry.get("agent_id"), entry.get("patch_sha256")) != (
                index, checkpoint.get("checkpoint_type"), checkpoint.get("agent_id"), expected_patch):
            return f"checkpoint {index} is not the one link {index} records"
        files = entry.get("trajectories")
        if not isinstance(files, list):
            return f"link {index} names no trajectory list"
        for file in files:
            data = read(str(file.get("path"))) if isinstance(file, dict) else None
            if data is None:
                return f"trajectory {str(file.get('path') if isinstance(file, dict) else file)[:200]!r} of link " \
                       f"{index} is not beside the predictions file"
            if sha256(data) != file.get("sha256"):
                return f"trajectory {str(file['path'])[:200]!r} changed since link {index} was made"
        previous = entry["link"]
    return None
