"""One scenario on one time axis: the typed records that `htmltimeline` draws, built from what a run left.

A prediction's folder holds its `result.json` (verdict, trust, merges, per-dependency DRS and CAIL) and its
`dependency_probe_checkpoints.jsonl` (which probe group passed at which step); a line of `run_agents.py` adds the
runner's timed events (manager messages, hand-offs, reruns, artifacts, merges) and the agents' trajectories (every
prompt, response and command, with times). `build_timeline` joins them; any part may be missing, and the timeline
then says what it lacks instead of guessing. All of it is untrusted data: this module only reads values (never
trusting their types) and trims texts; the page escapes them.

Times: wall clock (seconds from the scenario's first recorded time) when the trajectories and events carry it;
otherwise the axis is the sequence of checkpoint steps and response numbers.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from asyncodebench.scoring.sad import new_definitions

TEXT_CHARS = 1_500  # of each text a page keeps at most (an output's tail, a prompt's or a response's head)
PAGE_TEXT_CHARS = 900_000  # of text in all a page keeps: each text gets its share of it, at least MIN_TEXT_CHARS
MIN_TEXT_CHARS = 200
COMMAND_CHARS = 300  # of a command shown again with its output (its response shows it whole)
MANAGER = "manager"
INTEGRATED = "integrated state"
# manager event -> the arrow's kind; its `agent_id` is the target, its `source` (default: the manager) the start
ARROWS = {"message_sent": "message", "artifact_handed_off": "hand-off", "rerun_requested": "rerun",
          "message_undelivered": "undelivered"}


@dataclass(frozen=True)
class Text:
    """A text as the page keeps it: at most TEXT_CHARS, and how many characters were left out."""

    text: str
    cut: int = 0

    @classmethod
    def head(cls, value: Any, limit: int = TEXT_CHARS) -> Text:
        """The first `limit` characters."""
        text = value if isinstance(value, str) else ("" if value is None else str(value))
        return cls(text[:limit], max(0, len(text) - limit))

    @classmethod
    def tail(cls, value: Any, limit: int = TEXT_CHARS) -> Text:
        """The last `limit` characters."""
        text = value if isinstance(value, str) else ("" if value is None else str(value))
        return cls(text[-limit:] if len(text) > limit else text, max(0, len(text) - limit))


@dataclass(frozen=True)
class Entry:
    """One line of a trajectory: a prompt, a model response, a command with its output, a message received, an
    error or the loop's end."""

    kind: str  # prompt | response | command | inbox | error | exit
    index: int  # the line's position in its trajectory file
    at: float | None  # seconds from the scenario's start; None: the line has no readable time
    title: str  # one line: what it is
    text: Text  # the prompt, the response, the command, the message
    output: Text | None = None  # a command's output (its tail)
    exit_code: int | None = None
    tokens: tuple[int | None, int | None] = (None, None)  # prompt, completion
    response: int | None = None  # the model response's number in its run (1-based)


@dataclass(frozen=True)
class AgentRun:
    """One trajectory file: an agent's run (a rerun is a second one of the same lane)."""

    label: str  # the file's name without `.jsonl`: `api_agent`, `api_agent.run2`, `manager`
    href: str | None  # a link to the full file, relative to the page; None: none that stays in the run folder
    entries: tuple[Entry, ...]
    problem: str | None = None  # why the file was not read, or what of it is left out
    termination: str | None = None  # its summary line's termination reason

    @property
    def responses(self) -> int:
        """How many model responses the run made."""
        return sum(1 for e in self.entries if e.kind == "response")


@dataclass(frozen=True)
class Lane:
    """One agent (or the manager): its runs in order."""

    lane_id: str
    runs: tuple[AgentRun, ...]


@dataclass(frozen=True)
class Arrow:
    """A manager message, a hand-off or a rerun, from one lane to another."""

    kind: str  # message | hand-off | rerun | undelivered
    source: str
    target: str
    at: float | None
    posted: bool | None  # the target's inbox took it; None: not recorded


@dataclass(frozen=True)
class Merge:
    """An agent's artifact merged into the integrated state."""

    agent_id: str
    status: str  # clean | conflict | scope violation | no patch | the recorded status
    reason: str | None
    files: tuple[str, ...]  # the paths its artifact changed
    out_of_scope: tuple[str, ...]
    at: float | None
    step: int | None  # the logical step of its integration_after_merge checkpoint
    files_recorded: bool = True  # False: the result's record, which names no files (only those out of scope)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint record, placed on the axis where the run recorded the state it probes."""

    step: int
    kind: str  # agent_artifact | integration_after_merge | final_integrated | another recorded type
    agent_id: str | None
    workspace_kind: str
    at: float | None


@dataclass(frozen=True)
class ProbeRow:
    """One dependency point: the first step where each probe group passed, and its DRS and CAIL numbers."""

    dependency_id: str
    producer: str
    consumer: str
    up: int | None  # first step, any workspace, where the upstream group passed
    down: int | None
    drs: int | None  # first integrated-workspace step where the integrated group passed
    final_pass: bool
    resolved: bool
    cail_raw: int | None
    drs_penalized: int | None
    cail_penalized: int | None
    passes: tuple[tuple[bool, bool, bool], ...]  # per step: upstream, downstream, integrated


@dataclass(frozen=True)
class SadMark:
    """A SAD-proxy candidate: a consumer symbol that looks like a re-implementation of a producer contract, at the
    response that first defined it (None: no response of the consumer's trajectories shows it)."""

    file: str
    symbol: str
    agent_id: str | None
    at: float | None
    response: int | None
    run_label: str | None


@dataclass(frozen=True)
class Verdict:
    """How the prediction ended: its result, trust status and flags."""

    status: str  # evaluated | infrastructure_error | not evaluated
    outcome: str | None
    final_success: bool | None
    pass_rate: float | None
    tests: str | None  # `passed / denominator`
    trust: str | None
    trust_reasons: tuple[str, ...]
    flags: tuple[str, ...]
    failure: str | None  # the infrastructure failure, when there is one


@dataclass(frozen=True)
class Timeline:
    """Everything one scenario's page shows."""

    task_id: str
    protocol: str
    model: str
    scenario_id: str | None
    axis: str  # "wall clock" | "sequence"
    start: str | None  # the wall-clock time of 0 s
    span: float  # seconds (wall clock) or steps (sequence) the axis covers
    lanes: tuple[Lane, ...]
    arrows: tuple[Arrow, ...]
    merges: tuple[Merge, ...]
    checkpoints: tuple[Checkpoint, ...]
    probes: tuple[ProbeRow, ...]
    sad: tuple[SadMark, ...]
    verdict: Verdict
    missing: tuple[str, ...] = ()  # what the run did not leave, in words
    links: tuple[tuple[str, str], ...] = ()  # (text, href) of the prediction's own files


@dataclass(frozen=True)
class Sources:
    """What `build_timeline` reads, as loaded from the files (`timeline_files`): JSON values, unchecked."""

    result: Mapping[str, Any] | None  # result.json
    checkpoints: Sequence[Mapping[str, Any]] = ()  # dependency_probe_checkpoints.jsonl's records
    line: Mapping[str, Any] | None = None  # the prediction's line (its `runner` record)
    trajectories: Sequence[tuple[str, str | None, Sequence[Mapping[str, Any]], str | None]] = ()
    # per trajectory: (label, href, its lines, problem)
    flags: Sequence[str] = ()  # the report row's flags, as labels
    links: Sequence[tuple[str, str]] = ()
    notes: Sequence[str] = field(default_factory=tuple)  # what reading the files found missing


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO 8601 time (with its zone; a naive one is read as UTC); None when it is not one."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _objects(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def lane_of(label: str, runner_agents: Sequence[Mapping[str, Any]], path: str) -> str:
    """The lane of a trajectory: the agent whose run names the file, else its name up to the first dot."""
    for agent in runner_agents:
        if agent.get("trajectory") == path and isinstance(agent.get("agent_id"), str):
            return str(agent["agent_id"])
    return label.split(".", 1)[0] or label


class _Clock:
    """Seconds from the scenario's first recorded time."""

    def __init__(self, times: list[dt.datetime]) -> None:
        self.zero = min(times) if times else None

    def at(self, value: Any) -> float | None:
        moment = parse_time(value)
        if moment is None or self.zero is None:
            return None
        return round((moment - self.zero).total_seconds(), 3)


def _entry(line: Mapping[str, Any], clock: _Clock, responses: int, limit: int) -> Entry | None:
    kind, index, at = line.get("type"), _int(line.get("index")) or 0, clock.at(line.get("time"))
    if kind == "message":
        role = _str(line.get("role")) or "message"
        return Entry("prompt", index, at, f"{role} prompt", Text.head(line.get("content"), limit))
    if kind == "response":
        commands = [c for c in line.get("commands") or [] if isinstance(c, str)] if isinstance(
            line.get("commands"), list) else []
        text = _str(line.get("content"))
        if commands:
            text = (text + "\n" if text else "") + "\n".join(f"$ {c}" for c in commands)
        return Entry("response", index, at, f"model response {responses + 1}", Text.head(text, limit),
                     tokens=(_int(line.get("prompt_tokens")), _int(line.get("completion_tokens"))),
                     response=responses + 1)
    if kind == "observation":
        code = _int(line.get("exit_code"))
        title = "command" + (" (timed out)" if line.get("timed_out") is True else f", exit {code}")
        return Entry("command", index, at, title, Text.head(line.get("command"), min(limit, COMMAND_CHARS)),
                     Text.tail(line.get("output"), limit),
                     exit_code=code)
    if kind == "inbox":
        return Entry("inbox", index, at, "message received", Text.head(line.get("content"), limit))
    if kind == "exit":
        return Entry("exit", index, at, f"loop ended: {_str(line.get('exit_status'))}",
                     Text.head(line.get("content"), limit))
    if kind in ("format_error", "retry", "timeout", "error"):
        detail = line.get("message") or line.get("content") or line.get("failure") or ""
        return Entry("error", index, at, _str(kind).replace("_", " "), Text.head(detail, limit))
    return None


def _agent_run(label: str, href: str | None, lines: Sequence[Mapping[str, Any]], problem: str | None,
               clock: _Clock, limit: int) -> AgentRun:
    entries: list[Entry] = []
    termination = None
    for line in lines:
        if line.get("type") == "summary":
            termination = _str(line.get("termination_reason")) or None
            continue
        entry = _entry(line, clock, sum(1 for e in entries if e.kind == "response"), limit)
        if entry is not None:
            entries.append(entry)
    return AgentRun(label, href, tuple(entries), problem, termination)


def merge_status(status: str, reason: str | None) -> str:
    """A merge's result in the words of the issue: clean, conflict, scope violation (or what was recorded)."""
    if reason == "scope_violation" or status == "scope_violation":
        return "scope violation"
    if reason in ("merge_conflict", "patch_did_not_apply") or "conflict" in status:
        return "conflict"
    if status == "missing_input":
        return "no patch"
    return status or "not recorded"


def _checkpoints(records: Sequence[Mapping[str, Any]], events: list[Mapping[str, Any]],
                 clock: _Clock) -> list[Checkpoint]:
    """The checkpoint records in step order, each at the time of the runner's event of the same kind and agent (the
    k-th such event for the k-th such record): the records themselves carry the time of the probe, not of the
    state."""
    used: set[int] = set()
    out = []
    for record in sorted(records, key=lambda r: _int(r.get("logical_step")) or 0):
        step = _int(record.get("logical_step"))
        if step is None:
            continue
        kind, agent = _str(record.get("checkpoint_type")), record.get("agent_id")
        at = None
        for i, event in enumerate(events):
            if i not in used and event.get("event") == kind and (kind == "final_integrated"
                                                                 or event.get("agent_id") == agent):
                used.add(i)
                at = clock.at(event.get("time"))
                break
        out.append(Checkpoint(step, kind, agent if isinstance(agent, str) else None,
                              _str(record.get("workspace_kind")), at))
    return out


def _merge_step(merge_steps: list[Checkpoint], agent: str, done: list[Merge]) -> int | None:
    """The step of a merge's integration_after_merge checkpoint: the next one of its agent not taken yet, or, in
    records that name no agent (upstream's), the next one in order."""
    taken = {m.step for m in done}
    free = [c for c in merge_steps if c.step not in taken]
    return next((c.step for c in free if c.agent_id == agent), next((c.step for c in free if c.agent_id is None),
                                                                    None))


def _merges(events: list[Mapping[str, Any]], result: Mapping[str, Any] | None, checkpoints: list[Checkpoint],
            clock: _Clock) -> list[Merge]:
    """Every merge with its time and files: from the runner's events when it recorded them, else from the
    result's integration record (no times, no files but the out-of-scope ones)."""
    merge_steps = [c for c in checkpoints if c.kind == "integration_after_merge"]
    changed: dict[str, tuple[str, ...]] = {}
    out: list[Merge] = []
    for event in events:
        agent = _str(event.get("agent_id"))
        if event.get("event") == "agent_artifact":
            changed[agent] = tuple(_str(p) for p in event.get("changed_paths") or [] if isinstance(p, str))
        elif event.get("event") == "integration_after_merge":
            reason = event.get("reason") if isinstance(event.get("reason"), str) else None
            step = _merge_step(merge_steps, agent, out)
            out.append(Merge(agent, merge_status(_str(event.get("merge_status")), reason), reason,
                             changed.get(agent, ()), tuple(_str(p) for p in event.get("out_of_scope") or []),
                             clock.at(event.get("time")), step))
    if out or not result:
        return out
    integration = result.get("integration")
    for merge in _objects(integration.get("merges") if isinstance(integration, Mapping) else None):
        agent = _str(merge.get("agent_id"))
        reason = merge.get("reason") if isinstance(merge.get("reason"), str) else None
        step = _merge_step(merge_steps, agent, out)
        out_of_scope = tuple(_str(p) for p in merge.get("out_of_scope") or [])
        out.append(Merge(agent, merge_status(_str(merge.get("merge_status")), reason), reason, (), out_of_scope,
                         None, step, files_recorded=False))
    return out


def _passes(records: Sequence[Mapping[str, Any]], dependency_id: str) -> tuple[tuple[bool, bool, bool], ...]:
    out = []
    for record in sorted(records, key=lambda r: _int(r.get("logical_step")) or 0):
        row = next((r for r in _objects(record.get("dependency_results")) if r.get("dependency_id") == dependency_id),
                   {})
        groups = _mapping(row.get("groups"))
        out.append(tuple(_mapping(groups.get(g)).get("passed") is True for g in ("upstream", "downstream",
                                                                                  "integrated")))
    return tuple(out)  # type: ignore[arg-type]


def _probe_rows(result: Mapping[str, Any] | None, records: Sequence[Mapping[str, Any]]) -> list[ProbeRow]:
    """Per dependency point, the numbers the result scored (`run_metrics`), with who produces and consumes it from
    the checkpoint records."""
    metrics = result.get("run_metrics") if result else None
    parties: dict[str, tuple[str, str]] = {}
    for record in records:
        for row in _objects(record.get("dependency_results")):
            parties.setdefault(_str(row.get("dependency_id")), (_str(row.get("producer_agent")),
                                                                _str(row.get("consumer_agent"))))
    rows = []
    for dep in _objects(metrics.get("dependencies") if isinstance(metrics, Mapping) else None):
        dep_id = _str(dep.get("dependency_id"))
        producer, consumer = parties.get(dep_id, ("", ""))
        rows.append(ProbeRow(dep_id, producer, consumer, _int(dep.get("up")), _int(dep.get("down")),
                             _int(dep.get("drs")), dep.get("final_integrated_pass") is True,
                             dep.get("resolved") is True, _int(dep.get("cail_raw")), _int(dep.get("drs_penalized")),
                             _int(dep.get("cail_penalized")), _passes(records, dep_id)))
    return rows


_DEFINES = re.compile(r"^\+?\s*(?:async\s+def|def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


def _sad_marks(result: Mapping[str, Any] | None, lanes: list[Lane], probes: list[ProbeRow]) -> list[SadMark]:
    """The result's SAD-proxy candidates, each at the first response of a consumer whose commands define the
    symbol (names compared as the proxy compares them: lowercase, no underscores)."""
    sad = result.get("sad_proxy") if result else None
    candidates = sad.get("candidates") if isinstance(sad, Mapping) else None
    consumers = {p.consumer for p in probes if p.consumer}
    marks = []
    for candidate in candidates if isinstance(candidates, list) else []:
        if not (isinstance(candidate, list) and len(candidate) == 2):
            continue
        file, symbol = _str(candidate[0]), _str(candidate[1])
        found: SadMark | None = None
        for lane in lanes:
            if consumers and lane.lane_id not in consumers:
                continue
            for run in lane.runs:
                for entry in run.entries:
                    if entry.kind == "response" and _defines(entry.text.text, file, symbol):
                        found = SadMark(file, symbol, lane.lane_id, entry.at, entry.response, run.label)
                        break
                if found:
                    break
            if found:
                break
        marks.append(found or SadMark(file, symbol, None, None, None, None))
    return marks


def _defines(text: str, file: str, symbol: str) -> bool:
    """Whether a response's commands define `symbol` (normalized): in a diff of `file`, or in a def/class line."""
    if symbol in new_definitions(text).get(file, set()):
        return True
    return any(name.lower().replace("_", "") == symbol for name in _DEFINES.findall(text))


def _verdict(result: Mapping[str, Any] | None, flags: Sequence[str]) -> Verdict:
    if not result:
        return Verdict("not evaluated", None, None, None, None, None, (), tuple(flags), None)
    failure = result.get("infrastructure_error")
    trust = _mapping(result.get("trust"))
    passed, denominator = _int(result.get("tests_passed")), _int(result.get("tests_denominator"))
    rate = result.get("pass_rate")
    return Verdict(
        _str(result.get("status")) or "not recorded", _str(result.get("outcome")) or None,
        result.get("final_success") if isinstance(result.get("final_success"), bool) else None,
        float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None,
        f"{passed} / {denominator}" if passed is not None else None, _str(trust.get("status")) or None,
        tuple(_str(r) for r in trust.get("reasons") or [] if r) if isinstance(trust.get("reasons"), list) else (),
        tuple(flags),
        f"{_str(failure.get('kind'))}: {_str(failure.get('message'))}" if isinstance(failure, Mapping) else None)


def build_timeline(sources: Sources) -> Timeline:
    """The scenario's timeline from what its run left (see `Sources`)."""
    result, line = sources.result or {}, sources.line or {}
    runner = _mapping(line.get("runner"))
    events = _objects(runner.get("events"))
    agents = _objects(runner.get("agents"))
    times = [t for e in events if (t := parse_time(e.get("time")))]
    times += [t for _, _, lines, _ in sources.trajectories for x in lines if (t := parse_time(x.get("time")))]
    clock = _Clock(times)
    # each text's share of the page's budget (an observation holds two: its command and its output)
    texts = sum(1 + (x.get("type") == "observation") for _, _, lines, _ in sources.trajectories for x in lines)
    limit = max(MIN_TEXT_CHARS, min(TEXT_CHARS, PAGE_TEXT_CHARS // max(texts, 1)))
    by_lane: dict[str, list[AgentRun]] = {}
    paths = [p for p in line.get("trajectories") or [] if isinstance(p, str)] if isinstance(
        line.get("trajectories"), list) else []
    for label, href, lines, problem in sources.trajectories:
        path = next((p for p in paths if PurePosixPath(p).stem == label), "")
        lane = MANAGER if label == MANAGER else lane_of(label, agents, path)
        by_lane.setdefault(lane, []).append(_agent_run(label, href, lines, problem, clock, limit))
    for agent in agents:  # a run the runner records whose trajectory was not read still gets its lane
        by_lane.setdefault(_str(agent.get("agent_id")), [])
    order = [MANAGER] if MANAGER in by_lane else []
    order += [lane for lane in by_lane if lane != MANAGER]
    lanes = [Lane(lane, tuple(by_lane[lane])) for lane in order]
    checkpoints = _checkpoints(sources.checkpoints, events, clock)
    merges = _merges(events, result, checkpoints, clock)
    arrows = [Arrow(ARROWS[_str(e.get("event"))], _str(e.get("source")) or MANAGER, _str(e.get("agent_id")),
                    clock.at(e.get("time")), e.get("posted") if isinstance(e.get("posted"), bool) else None)
              for e in events if e.get("event") in ARROWS]
    probes = _probe_rows(result, sources.checkpoints)
    wall = clock.zero is not None
    span = max([0.0] + [x for x in (
        [e.at for lane in lanes for run in lane.runs for e in run.entries] + [c.at for c in checkpoints]
        + [m.at for m in merges] + [a.at for a in arrows]) if x is not None]) if wall else float(
        max([len(checkpoints)] + [run.responses for lane in lanes for run in lane.runs] + [1]))
    missing = list(sources.notes)
    if not sources.trajectories:
        missing.append("no agent trajectories: the lanes show no responses or commands")
    if not events:
        missing.append("no runner events: no manager messages, hand-offs or timed merges (merges are placed at "
                       "their checkpoint steps)")
    if not sources.checkpoints:
        missing.append("no dependency probe checkpoint records: no probe rows")
    return Timeline(
        task_id=_str(result.get("task_id") or line.get("task_id")), protocol=_str(result.get("protocol")
                                                                               or line.get("protocol")),
        model=_str(result.get("model_name_or_path") or line.get("model_name_or_path")),
        scenario_id=_str(runner.get("scenario_id")) or None, axis="wall clock" if wall else "sequence",
        start=clock.zero.isoformat(timespec="seconds") if clock.zero else None, span=span,
        lanes=tuple(lanes), arrows=tuple(arrows), merges=tuple(merges), checkpoints=tuple(checkpoints),
        probes=tuple(probes), sad=tuple(_sad_marks(result, lanes, probes)), verdict=_verdict(sources.result,
                                                                                               sources.flags),
        missing=tuple(missing), links=tuple(sources.links))
