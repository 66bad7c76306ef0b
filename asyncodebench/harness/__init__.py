"""Evaluating patches in task containers, the untrusted part of a run: `spec` (a task as the harness runs it) ->
`sandbox` (one bounded container) + `workspace` (one prepared step, one pytest process) -> `evaluation` (all steps
of a prediction, with `integration` and `probes`); `patches` reads diffs, `overlays` fetches the upstream overlay
patches, `baseline` measures each task's base state. `incontainer/` holds the scripts copied into containers."""
