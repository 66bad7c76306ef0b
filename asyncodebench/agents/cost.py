"""What the model calls of a scenario cost, and the caps on it (`--max-cost` per agent run, `--max-scenario-cost`
per scenario): each response's cost is the usage the endpoint reported (prompt and completion tokens) at the
prices of the table the user passed (`--prices`), in US dollars.

A cap is checked before each request: an agent (or the manager) whose spending, or whose scenario's, has reached
its cap makes no further call and ends as `cost_limit`, a valid ending (the model's spending, as `iteration_limit`
is), never an infrastructure error. A request under way is not cut short, so a run may pass its cap by one
response. The scenario's agents run at the same time: one `ScenarioCost` is shared by all of them.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from asyncodebench.agents.adapter import COST_LIMIT, CostLimits

PRICE_KEYS = ("prompt_per_million", "completion_per_million")


class PriceTableError(ValueError):
    """A price table that cannot be used: the message says what to give instead."""


def load_prices(path: Path, model: str) -> tuple[float, float]:
    """The prices of `model` in the table at `path`: a JSON object mapping model names (as --model gives them) to
    `{"prompt_per_million": USD, "completion_per_million": USD}`.

    Raises:
        PriceTableError: the file cannot be read, or holds no valid prices for `model`.
    """
    example = f'{{"{model}": {{"prompt_per_million": 3.0, "completion_per_million": 15.0}}}}'
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PriceTableError(f"--prices {path}: not a readable JSON file ({exc}); give e.g. {example}") from exc
    if not isinstance(table, dict) or model not in table:
        known = sorted(table) if isinstance(table, dict) else []
        raise PriceTableError(f"--prices {path} has no prices for the model {model!r} (it has {known[:10]}); add "
                              f"them, e.g. {example}")
    entry = table[model]
    if not isinstance(entry, dict) or set(entry) != set(PRICE_KEYS) or not all(
            isinstance(entry[k], (int, float)) and not isinstance(entry[k], bool) and math.isfinite(entry[k])
            and entry[k] >= 0 for k in PRICE_KEYS):
        raise PriceTableError(f"--prices {path}: the entry of {model!r} must be exactly {example} (USD per million "
                              "tokens, 0 or more)")
    return float(entry["prompt_per_million"]), float(entry["completion_per_million"])


class CostLimitReached(Exception):
    """An agent may not ask the model again: its spending, or its scenario's, reached a cap."""

    termination_reason = COST_LIMIT


class ScenarioCost:
    """The spending of one scenario's model calls, shared by its agents (thread-safe); `agent()` gives each agent
    run its own account."""

    def __init__(self, limits: CostLimits) -> None:
        self.limits = limits
        self.spent = 0.0
        self.lock = threading.Lock()

    def agent(self) -> AgentCost:
        """A new agent run's account in this scenario."""
        return AgentCost(self)


class AgentCost:
    """One agent run's spending, counted in its scenario's too."""

    def __init__(self, scenario: ScenarioCost) -> None:
        self.scenario = scenario
        self.spent = 0.0

    def check(self) -> None:
        """Before a request.

        Raises:
            CostLimitReached: the agent's cap or the scenario's is reached (the message says which).
        """
        limits = self.scenario.limits
        with self.scenario.lock:
            scenario_spent = self.scenario.spent
        if limits.max_agent_usd is not None and self.spent >= limits.max_agent_usd:
            raise CostLimitReached(f"the agent spent ${self.spent:.6f} of its --max-cost ${limits.max_agent_usd}")
        if limits.max_scenario_usd is not None and scenario_spent >= limits.max_scenario_usd:
            raise CostLimitReached(f"the scenario's agents spent ${scenario_spent:.6f} of its --max-scenario-cost "
                                   f"${limits.max_scenario_usd}")

    def add(self, usage: Any) -> float:
        """Count a response's reported usage (its `usage` object); its cost."""
        usage = usage if isinstance(usage, dict) else {}
        cost = self.scenario.limits.cost(_tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens")))
        self.spent += cost
        with self.scenario.lock:
            self.scenario.spent += cost
        return cost


def _tokens(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
