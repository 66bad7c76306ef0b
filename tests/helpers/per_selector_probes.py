"""The upstream way to probe (METRICS 0.1 step 1): one pytest process per selector, read with `selector_status`.

Kept with the tests as the reference the harness must agree with; the package does not ship it. It runs the way the
upstream harness does, in a plain container of the task image (root, writable image filesystem, the state set up
with git), so comparing it with `Workbench.probe` checks both the batching (METRICS decision 8) and that the
harness's isolation leaves honest statuses unchanged. Used by tests/test_probe_equivalence.py and
scripts/bench_harness.py.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from typing import Any

from asyncodebench.harness.spec import TaskSpec
from asyncodebench.scoring.grading import SelectorResult, selector_status

IO_DIR = "/asyncodebench-reference"
LABEL = {"org.asyncodebench.run_id": "per-selector-reference"}


class ReferenceBox:
    """A plain, long-lived container of the task image, as the upstream harness uses it."""

    def __init__(self, client: Any, spec: TaskSpec, memory: str = "1g") -> None:
        self.spec = spec
        self.container = client.containers.run(spec.pinned_ref, ["sleep", "infinity"], detach=True, entrypoint=[],
                                               network_mode="none", mem_limit=memory, memswap_limit=memory,
                                               working_dir=spec.workdir, labels=LABEL)

    def __enter__(self) -> ReferenceBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.container.remove(force=True)

    def sh(self, script: str) -> tuple[int, str]:
        code, output = self.container.exec_run(["sh", "-c", script], workdir=self.spec.workdir)
        return code, output.decode("utf-8", "replace")

    def set_state(self, patch: bytes = b"", after: str = "true") -> None:
        """Reset the checkout to the base commit, apply `patch`, then run the shell command `after`."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo("state.diff")
            info.size = len(patch)
            tar.addfile(info, io.BytesIO(patch))
        self.container.put_archive("/tmp", buffer.getvalue())
        code, output = self.sh(f"git reset -q --hard {self.spec.base_revision} && git clean -qfdx && "
                               f"{{ [ ! -s /tmp/state.diff ] || git apply /tmp/state.diff; }} && {after}")
        assert code == 0, output

    def per_selector_results(self, probe_timeout: int,
                             selectors: tuple[str, ...] | None = None) -> dict[str, SelectorResult]:
        """`cd <ws>; PYTHONPATH=<ws>/src:<ws>; timeout P python -m pytest --json-report ... <s>` for each s."""
        results = {}
        work = shlex.quote(self.spec.workdir)
        for i, selector in enumerate(selectors if selectors is not None else self.spec.selectors):
            report = f"{IO_DIR}/selector-{i}.json"
            command = shlex.join([self.spec.interpreter, "-m", "pytest", "--json-report",
                                  f"--json-report-file={report}", "--continue-on-collection-errors", selector])
            _, output = self.sh(f"mkdir -p {IO_DIR} && rm -f {report} && cd {work} && "
                                f'PYTHONPATH={work}/src:{work}:"${{PYTHONPATH:-}}" timeout {probe_timeout} '
                                f"{command} >/dev/null 2>&1; echo $?; cat {report} 2>/dev/null")
            code_line, _, raw = output.partition("\n")
            tests = json.loads(raw).get("tests") or [] if raw.strip() else []
            results[selector] = selector_status(selector, tests, int(code_line), False)
        return results
