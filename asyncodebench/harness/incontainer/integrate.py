"""Integrate specialists' patches inside the task container, in dependency order, and export every state.

Runs on the trusted side (root) in a container where no evaluated code ever runs, with the task's interpreter
(standard library only). Reads `<io>/prepare.json` (work tree, base revision, overlays, git settings) and
`<io>/integrate.json`: the agents in merge order with their patch file, whether the host accepted the patch's
scope, and whether agents work on the integrated state (serial) or privately on the base. Writes
`<io>/integrated.json`: per agent the merge status and strategy, and the cumulative diff (against the canonical
base) of its agent workspace and of the integrated workspace after its merge.
"""

import json
import os
import sys

from prepare import Config, canonical_state, copy_image_tree
from prepare import git as git_with

CFG = None


def git(*args, **kwargs):
    """Git in the work tree with the preparation's settings (`prepare.git`): (exit code, text)."""
    return git_with(CFG, *args, **kwargs)


def state_diff(canonical, ref):
    """The cumulative diff (binary included) of the state `ref` against the canonical base."""
    return git("diff", "--binary", canonical, ref)[1]


def commit_state(message):
    """Commit the work tree as it is (no hooks, empty allowed); return the new commit's SHA."""
    git("add", "-A")
    git("commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return git("rev-parse", "HEAD")[1].strip()


def try_apply(patch_path):
    """Apply onto the checked-out state; returns (status, strategy, log)."""
    code, log = git("apply", "--binary", "--whitespace=nowarn", patch_path, check=False)
    if code == 0:
        return "clean", "git-apply", log
    code, log3 = git("apply", "--3way", "--binary", "--whitespace=nowarn", patch_path, check=False)
    if code == 0:
        return "clean", "git-apply-3way", log + log3
    conflicted = "conflict" in log3.lower()
    git("reset", "--hard", "-q")
    git("clean", "-ffdxq")
    return ("conflict" if conflicted else "error"), "git-apply-3way", log + log3


def integrate_agent(agent, canonical, integrated, serial):
    """Apply one agent's patch in its own workspace (the integrated state when serial, else the canonical base), then
    merge it into the integrated state; return the agent's record and the integrated state's commit after it."""
    record = {"agent_id": agent["agent_id"], "scope_ok": agent["scope_ok"], "reason": None}
    start = integrated if serial else canonical
    git("checkout", "-q", "--detach", start)
    if agent["patch"] is None or os.path.getsize(agent["patch"]) == 0:
        record.update(merge_status="missing_input", strategy=None, reason="no patch from this agent")
        record["agent_state"] = state_diff(canonical, start)
    elif not agent["scope_ok"]:
        record.update(merge_status="error", strategy=None, reason="scope_violation")
        record["agent_state"] = state_diff(canonical, start)
    else:
        status, strategy, log = try_apply(agent["patch"])
        agent_ref = commit_state("agent " + agent["agent_id"]) if status == "clean" else start
        record["agent_state"] = state_diff(canonical, agent_ref)
        git("checkout", "-q", "--detach", integrated)
        if status == "clean":
            status, strategy, log = try_apply(agent["patch"])
        if status == "clean":
            integrated = commit_state("merge " + agent["agent_id"])
        record.update(merge_status=status, strategy=strategy, log=log[-3000:])
        if status != "clean":
            record["reason"] = "merge_conflict" if status == "conflict" else "patch_did_not_apply"
    git("checkout", "-q", "--detach", integrated)
    record["integrated_state"] = state_diff(canonical, integrated)
    return record, integrated


def main():
    """Integrate the agents `<io>/integrate.json` lists (`<io>` is argument 1); write `<io>/integrated.json`."""
    global CFG
    io_dir = sys.argv[1]
    with open(os.path.join(io_dir, "prepare.json")) as handle:
        CFG = Config(json.load(handle))
    with open(os.path.join(io_dir, "integrate.json")) as handle:
        cfg = json.load(handle)
    copy_image_tree(CFG.base_dir, CFG.workdir)
    os.chdir(CFG.workdir)
    canonical = canonical_state(CFG)
    integrated, agents = canonical, []
    for agent in cfg["agents"]:
        record, integrated = integrate_agent(agent, canonical, integrated, cfg["serial"])
        agents.append(record)
    result = {"canonical_ref": canonical, "agents": agents, "final_state": state_diff(canonical, integrated)}
    with open(os.path.join(io_dir, "integrated.json"), "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main()
