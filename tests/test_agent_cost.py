"""The runner's cost caps (asyncodebench/agents/cost.py) without containers: the price table's refusals, responses
priced from the usage the real scripted server reports, through the one model client, an agent's cap and its
scenario's shared by two agents, the relay refusing a capped in-container agent as a spent budget is refused, and
run_agents.py's refusals of a cap without prices."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.checkout import ROOT, SCRIPTS, script_env

from asyncodebench.agents.adapter import COST_LIMIT, INVALID_TERMINATIONS, CostLimits, ModelEndpoint
from asyncodebench.agents.cost import CostLimitReached, PriceTableError, ScenarioCost, load_prices
from asyncodebench.agents.model_client import ModelClient
from asyncodebench.agents.relay import ModelRelay
from asyncodebench.agents.scripted_server import ScriptedServer, parse_scripts
from asyncodebench.agents.trajectory import TrajectoryWriter

PRICES = {"prompt_per_million": 2.0, "completion_per_million": 10.0}
REQUEST = {"messages": [{"role": "user", "content": "x" * 4000}]}  # 1000 prompt tokens as the server counts them


def test_the_price_table_must_price_the_model(tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"my-model": PRICES, "broken": {"prompt_per_million": -1}}))
    assert load_prices(table, "my-model") == (2.0, 10.0)
    with pytest.raises(PriceTableError, match="no prices for the model 'other'.*add them"):
        load_prices(table, "other")
    with pytest.raises(PriceTableError, match="must be exactly"):
        load_prices(table, "broken")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(PriceTableError, match="not a readable JSON file"):
        load_prices(tmp_path / "bad.json", "my-model")


def test_a_cost_cap_is_a_valid_ending() -> None:
    assert COST_LIMIT not in INVALID_TERMINATIONS and CostLimitReached.termination_reason == COST_LIMIT


def endpoint(server: ScriptedServer, name: str, limits: CostLimits) -> ModelEndpoint:
    return ModelEndpoint(f"scripted/{name}", server.base_url, None, cost=limits)


def test_responses_are_priced_from_the_reported_usage_and_the_agent_cap_stops_the_next_call() -> None:
    limits = CostLimits(2.0, 10.0, max_agent_usd=0.005)
    with ScriptedServer(parse_scripts({"a": ["echo 1", "echo 2", "echo 3"]})) as server:
        account = ScenarioCost(limits).agent()
        client = ModelClient(endpoint(server, "a", limits), "a", cost=account)
        answer = client.complete(REQUEST)
        usage = answer["usage"]
        expected = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 10.0) / 1e6
        assert usage["prompt_tokens"] == 1000 and client.cost_usd == pytest.approx(expected)
        client.complete(REQUEST)  # twice $0.002 and a little: not yet $0.005
        assert account.spent < 0.005
        client.complete(REQUEST)
        asked = server.requests
        with pytest.raises(CostLimitReached, match=r"--max-cost \$0.005"):
            client.complete(REQUEST)
        assert server.requests == asked  # refused before any request


def test_the_scenario_cap_is_shared_by_its_agents() -> None:
    limits = CostLimits(2.0, 10.0, max_scenario_usd=0.004)
    scenario = ScenarioCost(limits)
    with ScriptedServer(parse_scripts({"a": ["echo 1"] * 3, "b": ["echo 1"] * 3})) as server:
        first = ModelClient(endpoint(server, "a", limits), "a", cost=scenario.agent())
        second = ModelClient(endpoint(server, "b", limits), "b", cost=scenario.agent())
        first.complete(REQUEST)
        second.complete(REQUEST)
        assert scenario.spent == pytest.approx((first.cost_usd or 0) + (second.cost_usd or 0))
        for client in (first, second):
            with pytest.raises(CostLimitReached, match=r"--max-scenario-cost \$0.004"):
                client.complete(REQUEST)


def test_the_relay_refuses_a_capped_agent_and_says_why(tmp_path: Path) -> None:
    limits = CostLimits(2.0, 10.0, max_agent_usd=0.001)
    with ScriptedServer(parse_scripts({"a": ["echo 1", "echo 2"]})) as server:
        relay = ModelRelay(endpoint(server, "a", limits), 10, TrajectoryWriter(tmp_path / "t.jsonl"),
                           cost=ScenarioCost(limits).agent())
        body = json.dumps(REQUEST).encode()
        assert relay.handle("POST", "/v1/chat/completions", body)[0] == 200
        status, answer = relay.handle("POST", "/v1/chat/completions", body)
    assert status == 429 and answer["error"]["code"] == "cost_limit"
    assert relay.cost_refusals and "--max-cost" in relay.cost_refusals[0]
    assert relay.failures == [] and relay.upstream_errors == []  # not the endpoint's failure


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-cost", "3"], "need --prices FILE"),
    (["--max-scenario-cost", "0"], "must be an amount above 0"),
    (["--prices", "missing.json"], "is not a file"),
])
def test_run_agents_refuses_a_cap_it_cannot_apply(flags: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / "run_agents.py"), "--model", "m", "--base-url",
                           "http://127.0.0.1:9/v1", "--scenarios", "*", *flags], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=script_env(None))
    assert done.returncode == 2 and message in done.stderr
