"""The upstream way to probe (METRICS 0.1 step 1): one pytest process per selector, read with `selector_status`.

Kept in tests/ as the reference the batched `asyncodebench.probes.run_probes` must agree with; the package does not
ship it. Used by tests/test_probe_equivalence.py and scripts/bench_harness.py.
"""

from __future__ import annotations

import json
import shlex

from asyncodebench.grading import SelectorResult, selector_status
from asyncodebench.sandbox import Sandbox
from asyncodebench.spec import TaskSpec

IO_DIR = "/asyncodebench-reference"
HOST_MARGIN_SECONDS = 30  # the upstream host-side limit is P + 30


def per_selector_results(box: Sandbox, spec: TaskSpec, probe_timeout: int,
                         selectors: tuple[str, ...] | None = None) -> dict[str, SelectorResult]:
    """Run `cd <ws>; PYTHONPATH=<ws>/src:<ws>; timeout P python -m pytest --json-report ... <s>` for each s."""
    results = {}
    work = shlex.quote(spec.workdir)
    for i, selector in enumerate(selectors if selectors is not None else spec.selectors):
        report = f"{IO_DIR}/selector-{i}.json"
        command = shlex.join([spec.interpreter, "-m", "pytest", "--json-report", f"--json-report-file={report}",
                              "--continue-on-collection-errors", selector])
        script = (f"mkdir -p {IO_DIR} && rm -f {report} && cd {work} && "
                  f'PYTHONPATH={work}/src:{work}:"${{PYTHONPATH:-}}" timeout {probe_timeout} {command} '
                  f">/dev/null 2>&1; echo $?")
        run = box.exec(script, probe_timeout + HOST_MARGIN_SECONDS)
        exit_code = -1 if run.killed_by_watchdog else int(run.output.decode().split()[-1])
        raw = None if run.killed_by_watchdog else box.read_file(report, 200_000_000)
        tests = json.loads(raw).get("tests") or [] if raw else []
        results[selector] = selector_status(selector, tests, exit_code, False)
    return results
