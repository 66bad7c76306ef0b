r"""Run agents on chosen scenarios (task x protocol) and write a predictions file that evaluate.py scores as it is.

    # a local OpenAI-compatible server (vLLM, SGLang, llama.cpp ...), every demo scenario under the five protocols
    .venv/bin/python scripts/run_agents.py --scenarios 'asyncodebench-demo:*' --dataset build/demo/dataset \
        --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --run-id qwen3-demo
    .venv/bin/python scripts/evaluate.py runs/qwen3-demo/predictions.jsonl --dataset build/demo/dataset

    # no model at all: a scripted OpenAI-compatible server on 127.0.0.1 replays per-agent replies
    .venv/bin/python scripts/run_agents.py --scenarios 'asyncodebench-demo:minicache/single' \
        --dataset build/demo/dataset --model scripted --scripts my_scripts.json

Scenarios are rows of the `scenarios` configuration, chosen by id patterns (`asyncodebench:wcwidth/*`, `*/single`,
comma-separated or repeated), under the five protocols: single, serial_specialists, async_private, caid_manager
(Async-RO-Manager) and async_manager (Async-Manager; both with a manager that writes no code). The manual is
docs/agents.md. The default agent is mini-swe-agent (in the kit's .venv through its test extra; elsewhere `<python>
-m pip install -e '.[agents]'`): its loop runs here, its commands in the task's pinned container (no network, the
harness's limits, as an unprivileged user). Each agent may answer up to the scenario's budget of model responses
(--budget overrides it, recorded). The model is reached through an OpenAI-compatible endpoint (--base-url; the key
from the environment variable --api-key-env names, OPENAI_API_KEY by default), or, without --base-url, as a litellm
model id (e.g. anthropic/claude-sonnet-4-5) with its provider's usual key variable.

Outputs go to <output-dir>/<run-id>/: predictions.jsonl (printed on stdout when done), settings.json, and per
scenario a folder with each agent's trajectory (trajectories/<agent>.jsonl), its patch (patches/<agent>.diff) and
the scenario's prediction.json. Rerunning the same command resumes: finished scenarios are kept.

Before the first scenario, one request checks the endpoint (preflight): a refused key, an unknown model, nothing
listening at --base-url or a server without tool calls stops the run at once (exit 2), nothing written. Every model
call is retried after transport errors (exponential waits, one stderr line each) for --endpoint-retry-seconds; a
scenario in which an agent or the manager still could not use its model is invalid (METRICS section 9): not a
prediction, reported, and redone by a rerun of the same command.

Exit codes: 0 every chosen scenario finished; 2 bad arguments, a configuration the preflight refused, or a run
folder in use or started with other settings; 3 infrastructure error (dataset, daemon, image, an endpoint that
kept failing: the scenarios it hit are not finished, or invalid; rerun to resume); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from asyncodebench import cli
from asyncodebench.agents.adapter import DEFAULT_AGENT_SECONDS, DEFAULT_REQUEST_TIMEOUT_SECONDS, DEFAULT_RETRY_SECONDS
from asyncodebench.agents.registry import AGENTS, DEFAULT_AGENT
from asyncodebench.dataset.rows import DEFAULT_DATASET, DEFAULT_REVISION


def dollars(text: str) -> float:
    """An amount of US dollars above 0."""
    return cli.positive_number(text, "is not an amount: give US dollars, such as 3 or 0.5",
                               "must be an amount above 0, such as 3 or 0.5")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", action="append", required=True, metavar="PATTERNS",
                        help="scenario id patterns, comma-separated, e.g. 'asyncodebench-demo:*' or '*/single'")
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="Hub id, or a local published folder")
    parser.add_argument("--revision", default=DEFAULT_REVISION, help="Hub revision (tag, branch or commit)")
    parser.add_argument("--model", required=True,
                        help="the model's name at the endpoint, a litellm model id, or 'scripted' (with --scripts)")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key-env", default=None, metavar="VARIABLE",
                        help="environment variable holding the endpoint's key (default OPENAI_API_KEY)")
    parser.add_argument("--scripts", type=Path, default=None,
                        help="with --model scripted: JSON file, agent name -> list of replies (see "
                             "asyncodebench/agents/scripted_server.py)")
    parser.add_argument("--agent", choices=AGENTS, default=DEFAULT_AGENT,
                        help="mini-swe-agent (its loop here, its commands in the container), or shell-cli (an example "
                             "agent run inside the container, its model calls relayed by this process)")
    parser.add_argument("--name", default=None,
                        help="model_name_or_path of the predictions (default: --model)")
    parser.add_argument("--budget", type=cli.positive_int, default=None,
                        help="model responses per agent run (default: the scenario's, 100 in the release); also caps "
                             "the manager's responses per event and in all")
    parser.add_argument("--request-timeout", type=cli.positive_int, default=int(DEFAULT_REQUEST_TIMEOUT_SECONDS),
                        help="seconds one model request may take before it is abandoned (and retried)")
    parser.add_argument("--endpoint-retry-seconds", type=cli.positive_int, default=int(DEFAULT_RETRY_SECONDS),
                        help="seconds a failing model call is retried (unreachable, timeout, 429, 5xx), from its "
                             "first failed attempt; then the agent's run, and its scenario, are invalid")
    parser.add_argument("--agent-seconds", type=int, default=int(DEFAULT_AGENT_SECONDS),
                        help="wall-clock seconds of one agent run, its model calls and commands (0: no limit); a "
                             "run that reaches it ends as wall_clock_timeout")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature sent with every model request (default: the endpoint's)")
    parser.add_argument("--max-tokens", type=cli.positive_int, default=None,
                        help="most tokens of one model response (default: the endpoint's)")
    parser.add_argument("--seed", type=int, default=None,
                        help="sampling seed sent with every model request, for endpoints that honour it")
    parser.add_argument("--prices", type=Path, default=None, metavar="FILE",
                        help="JSON price table, model name (as --model gives it) -> {\"prompt_per_million\": USD, "
                             "\"completion_per_million\": USD}: each response is priced from the usage the endpoint "
                             "reports, and every prediction records its cost")
    parser.add_argument("--max-cost", type=dollars, default=None, metavar="USD",
                        help="with --prices: the most one agent run (the manager's included) may spend; then it "
                             "ends as cost_limit (valid: the model's spending)")
    parser.add_argument("--max-scenario-cost", type=dollars, default=None, metavar="USD",
                        help="with --prices: the most one scenario's agents and manager may spend together; then "
                             "each ends as cost_limit at its next model call")
    parser.add_argument("--command-timeout", type=cli.positive_int, default=300,
                        help="seconds one agent command may run in the container")
    parser.add_argument("--memory", type=cli.memory_size, default="4g", help="container memory limit, no swap")
    parser.add_argument("--cpus", type=cli.cpus, default=1.0, help="CPUs each container may use")
    parser.add_argument("--pids", type=cli.pids, default=512, help="container process limit")
    parser.add_argument("--workspace-size", type=cli.memory_size, default="4g",
                        help="size of the agent's work tree (a tmpfs; its pages count against --memory)")
    parser.add_argument("--tmp-size", type=cli.memory_size, default="1g",
                        help="size of the agent's private /tmp and HOME (a tmpfs; its pages count against --memory)")
    parser.add_argument("--max-workers", type=cli.positive_int, default=1, help="scenarios run at the same time")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local: scenarios run on this machine's Docker; ray: each scenario a task on a node of a "
                             "Ray cluster offering the 'docker' resource (pip install -e '.[ray]'; the model endpoint "
                             "must be reachable from the nodes; see docs/agents.md)")
    parser.add_argument("--ray-address", default=None,
                        help="with --executor ray: the cluster's address, e.g. 10.0.0.5:6379 (default: auto)")
    parser.add_argument("--run-id", type=cli.run_id, default=None, help="the run folder's name (default: random)")
    parser.add_argument("--output-dir", type=Path, default=Path("runs"), help="where run folders go")
    parser.add_argument("--pull", action="store_true",
                        help="pull missing task images by digest (here, or on each Ray node that runs a scenario)")
    parser.add_argument("--overlays-dir", type=Path, default=None, help="checkout holding the overlay patches")
    parser.add_argument("--overlays-url", default=None, help="base URL to fetch the overlay patches from")
    args = parser.parse_args(argv)
    if (args.model == "scripted") != (args.scripts is not None):
        parser.error("--model scripted and --scripts FILE go together")
    if args.scripts is not None and not args.scripts.is_file():
        parser.error(f"--scripts {args.scripts} is not a file")
    if args.model == "scripted" and args.base_url:
        parser.error("--model scripted starts its own server; leave out --base-url")
    if (args.max_cost is not None or args.max_scenario_cost is not None) and args.prices is None:
        parser.error("--max-cost and --max-scenario-cost need --prices FILE (what a response costs)")
    if args.prices is not None and not args.prices.is_file():
        parser.error(f"--prices {args.prices} is not a file")
    if args.agent_seconds < 0:
        parser.error("--agent-seconds takes a number of seconds, or 0 for no limit")
    if args.ray_address is not None and args.executor != "ray":
        parser.error("--ray-address goes with --executor ray")
    if args.executor == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            parser.error("--executor ray needs Ray: pip install -e '.[ray]'")
    args.patterns = [p.strip() for group in args.scenarios for p in group.split(",") if p.strip()]
    return args


@cli.entry_point
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # After parsing, so --help loads none of them (litellm alone takes seconds).
    from asyncodebench.agents.runner import NoScenarioError, select
    from asyncodebench.agents.scripted_server import ScriptError, load_scripts

    scripts = None
    if args.scripts is not None:
        try:
            scripts = load_scripts(args.scripts)
        except ScriptError as exc:
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
    published = cli.load_rows(args.dataset, args.revision)
    try:
        scenarios, skipped = select(published.rows, args.patterns)
    except NoScenarioError as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
    for scenario_id in skipped:
        print(f"left out (protocol not implemented yet): {scenario_id}", file=sys.stderr)
    return run(args, published, scenarios, scripts)


def run(args: argparse.Namespace, published: Any, scenarios: list[Any], scripts: Any) -> int:
    import contextlib
    import dataclasses
    import hashlib

    from asyncodebench.agents.adapter import CallLimits, CostLimits, ModelEndpoint
    from asyncodebench.agents.cost import PriceTableError, load_prices
    from asyncodebench.agents.preflight import PreflightError, check_endpoint
    from asyncodebench.agents.registry import make_adapter
    from asyncodebench.agents.runfolder import SettingsChangedError, check_settings
    from asyncodebench.agents.runner import run_all
    from asyncodebench.agents.scenario_run import RunnerConfig
    from asyncodebench.agents.scripted_server import ScriptedServer
    from asyncodebench.harness.evaluation import Settings, new_run_id
    from asyncodebench.harness.sandbox import Limits, remove_run_containers
    from asyncodebench.run.runfolder import RunFolderBusyError, RunLock, container_key

    run_id = args.run_id or f"agents-{new_run_id()}"
    run_dir = args.output_dir / run_id
    problem = cli.writable_folder_problem(args.output_dir)
    if problem:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, f"--output-dir: {problem}")
    settings = Settings(limits=Limits(args.memory, args.cpus, args.pids, workspace=args.workspace_size,
                                      tmp=args.tmp_size))
    adapter = make_adapter(args.agent)
    scripted = scripts is not None
    limits = CallLimits(args.request_timeout, args.endpoint_retry_seconds, args.agent_seconds or None)
    sampling: dict[str, Any] = {"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed}
    cost = CostLimits()
    if args.prices is not None:
        try:
            prices = load_prices(args.prices, args.model)
        except PriceTableError as exc:
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
        cost = CostLimits(*prices, args.max_cost, args.max_scenario_cost)
    options = {**sampling, "cost": cost}  # the endpoint's sampling and prices, for the scripted server's too
    endpoint = ModelEndpoint(args.model, args.base_url, args.api_key_env or ("OPENAI_API_KEY" if args.base_url
                                                                             else None), limits, **options)
    if not scripted:  # before anything is written: a configuration that cannot work stops here
        try:
            found = check_endpoint(endpoint)
        except PreflightError as exc:
            raise cli.Exit(cli.EXIT_BAD_ARGUMENTS if exc.configuration else cli.EXIT_INFRASTRUCTURE, str(exc)) from exc
        if found.note:
            print(found.note, file=sys.stderr)
    recorded = {
        "dataset": published.describe(), "agent": f"{adapter.name} {adapter.version}", "model": args.model,
        "base_url": None if scripted else args.base_url, "name": args.name or args.model, "budget": args.budget,
        "command_timeout_seconds": args.command_timeout, "agent_seconds": limits.agent_seconds,
        "limits": dataclasses.asdict(settings.limits),
        "sampling": endpoint.sampling() or None,  # None when none is given: folders from before it still resume
        **({"cost": dataclasses.asdict(cost)} if cost.priced else {}),  # likewise
        "scripts_sha256": hashlib.sha256(args.scripts.read_bytes()).hexdigest() if scripted else None,
    }
    specs = {s.spec.task_id: s.spec for s in scenarios}
    try:
        with RunLock(run_dir):
            check_settings(run_dir, recorded)
            client = None
            key = container_key(run_dir, run_id)
            if args.executor == "local":  # with ray, the nodes check their images and clean their daemons
                for spec in specs.values():
                    client = cli.client_for_image(spec, allow_pull=args.pull)
                # Holding the lock, nothing else uses this run's containers: any left are an earlier start's.
                remove_run_containers(client, key)
            server = ScriptedServer(scripts) if scripted else contextlib.nullcontext()
            try:
                with server as running:
                    if running is not None:  # the scripted server
                        endpoint = ModelEndpoint("scripted", running.base_url, None, limits, **options)
                    config = RunnerConfig(run_dir, key, args.name or args.model, adapter, endpoint, scripted,
                                          args.budget, args.command_timeout, settings, args.max_workers,
                                          args.executor, args.ray_address, args.pull)
                    summary = run_all(client, config, scenarios, lambda spec: cli.task_overlays(args, spec))
            finally:
                if client is not None:
                    remove_run_containers(client, key)
    except (RunFolderBusyError, SettingsChangedError) as exc:
        raise cli.Exit(cli.EXIT_BAD_ARGUMENTS, str(exc)) from exc
    except KeyboardInterrupt:
        print(f"interrupted; to resume: {cli.resume_command(__file__, sys.argv[1:], run_id)}", file=sys.stderr)
        return cli.EXIT_INTERRUPTED
    print(f"{len(summary.lines)} of {len(scenarios)} scenarios finished ({summary.reused} from an earlier start) in "
          f"{run_dir}", file=sys.stderr)
    print(run_dir / "predictions.jsonl")
    problems = []
    if summary.failed:
        problems.append(f"{len(summary.failed)} scenario(s) not finished (see above)")
    if summary.invalid:
        causes = "; ".join(f"{scenario_id}: {why}" for scenario_id, why in summary.invalid.items())
        problems.append(f"{len(summary.invalid)} scenario(s) invalid, not results (a model endpoint failed: "
                        f"{causes[:2000]})")
    if problems:
        raise cli.Exit(cli.EXIT_INFRASTRUCTURE, f"{'; '.join(problems)}; fix the cause and rerun the same command "
                                                f"(same --run-id and --base-url) to redo exactly those: "
                                                f"{cli.resume_command(__file__, sys.argv[1:], run_id)}")
    return cli.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
