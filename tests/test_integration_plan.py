"""The host-side parts of agent patch integration: merge order and scope decisions (pure, no Docker)."""

from __future__ import annotations

from asyncodebench.harness.integration import merge_order, plan_artifacts
from asyncodebench.harness.spec import Agent, TaskSpec
from asyncodebench.scoring.dependency import DependencyPoint
from asyncodebench.scoring.patches import outside_scope, touched_paths


def dependency(producer: str, consumer: str) -> DependencyPoint:
    return DependencyPoint(f"{producer}_to_{consumer}", producer, consumer, (), (), ("t.py::a",), (), ("t.py::a",),
                           "", ("ADPR",))


def spec(agents: list[tuple[str, tuple[str, ...]]], deps: list[DependencyPoint]) -> TaskSpec:
    return TaskSpec("asyncodebench:x", "x", "0" * 40, "img:v0", "img@sha256:" + "0" * 64, "/testbed", "python", (),
                    ("tests",), ("tests",), (), None, (), (), tuple(Agent(a, p) for a, p in agents), tuple(deps))


def test_producers_merge_before_their_consumers_whatever_the_listing_order() -> None:
    task = spec([("ui", ("ui.py",)), ("core", ("core.py",)), ("io", ("io.py",))],
                [dependency("core", "ui"), dependency("io", "core")])
    assert merge_order(task) == ["io", "core", "ui"]


def test_integrator_edges_and_cycles_keep_the_specialist_order() -> None:
    assert merge_order(spec([("a", ("a.py",)), ("b", ("b.py",))], [dependency("a", "integrator")])) == ["a", "b"]
    cyclic = spec([("a", ("a.py",)), ("b", ("b.py",))], [dependency("a", "b"), dependency("b", "a")])
    assert merge_order(cyclic) == ["a", "b"]


def test_an_artifact_touching_another_agents_file_is_out_of_scope() -> None:
    task = spec([("core", ("core.py", "shared/")), ("ui", ("ui.py",))], [dependency("core", "ui")])
    patch = ("diff --git a/core.py b/core.py\n--- a/core.py\n+++ b/core.py\n"
             "diff --git a/shared/x.py b/shared/x.py\n--- a/shared/x.py\n+++ b/shared/x.py\n"
             "diff --git a/ui.py b/ui.py\n--- a/ui.py\n+++ b/ui.py\n").encode()
    core, ui = plan_artifacts(task, {"core": patch})
    assert core.agent_id == "core" and core.out_of_scope == ("ui.py",) and not core.scope_ok
    assert ui.patch is None and ui.scope_ok  # no patch: missing input, not a violation


def test_renames_and_unsafe_paths_are_seen_in_the_headers() -> None:
    paths = touched_paths("diff --git a/a.py b/b.py\nrename from a.py\nrename to b.py\n"
                          "diff --git a/../etc/x b/../etc/x\n--- /dev/null\n+++ b//abs\n")
    assert paths.paths == ("a.py", "b.py", "../etc/x", "/abs")
    assert paths.unsafe == ("../etc/x", "/abs")
    assert outside_scope(("a.py", "pkg/m.py"), ("pkg/",)) == ("a.py",)


def test_checkpoint_sequences_must_end_in_a_final_state(tmp_path) -> None:
    import json

    from asyncodebench.run.predictions import read_predictions

    def line(model: str, kinds: list[str], patch: str | None = None) -> str:
        checkpoints = [{"checkpoint_type": k, "workspace_kind": "integrated_workspace", "patch": ""} for k in kinds]
        row = {"task_id": "asyncodebench:x", "model_name_or_path": model, "protocol": "serial_specialists",
               "checkpoints": checkpoints, **({"model_patch": patch} if patch is not None else {})}
        return json.dumps(row)

    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join([
        line("ends-final", ["integration_after_merge", "final_integrated"]),
        line("final-in-the-middle", ["final_integrated", "integration_after_merge"]),
        line("no-final", ["integration_after_merge"]),
        line("no-final-but-patch", ["integration_after_merge"], "diff --git a/a b/a\n"),
    ]) + "\n")
    parsed = read_predictions(path, {"asyncodebench:x": {"a"}}, None)
    assert [p.model for p in parsed.predictions] == ["ends-final", "no-final-but-patch"]
    assert [(p.line, "final" in p.message) for p in parsed.problems] == [(2, True), (3, True)]
