"""The agents `run_agents.py --agent` can run, by name: the default mini-swe-agent (its loop on the host) and the
example command-line agent run inside the container (`cli_agent.shell_agent`). Adapters are made on demand, so
naming one imports only its own dependencies (mini-swe-agent imports litellm, seconds)."""

from __future__ import annotations

from asyncodebench.agents.adapter import AgentAdapter

DEFAULT_AGENT = "mini-swe-agent"
AGENTS = (DEFAULT_AGENT, "shell-cli")


def make_adapter(name: str) -> AgentAdapter:
    """The adapter called `name`.

    Raises:
        ValueError: no such agent (the message lists them).
    """
    if name == DEFAULT_AGENT:
        from asyncodebench.agents.miniswe import MiniSweAgent

        return MiniSweAgent()
    if name == "shell-cli":
        from asyncodebench.agents.cli_agent import shell_agent

        return shell_agent()
    raise ValueError(f"no agent {name!r}; choose among {', '.join(AGENTS)}")
