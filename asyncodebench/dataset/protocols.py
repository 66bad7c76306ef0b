"""The five execution protocols of AsynCodeBench, in release order: the one place the package names them.

Each protocol's id, the name tables show for it (the dataset card's `display_name`) and what kind of team it runs.
Every other module imports from here. Files that must stand on their own keep a copy, checked against this module
by tests/test_protocols.py: the protocol table the dataset is built from (`data/protocols.yaml`, which adds how each
protocol runs and its budget) and the published JSON schemas (`schemas/*.schema.json`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """One execution protocol: its id, the name tables show for it, and what kind of team it runs."""

    protocol_id: str
    display_name: str  # as the dataset card and the `scenarios` rows name it
    multi_agent: bool  # its agents are the task's specialists (the scenario's assignments are the task's)
    integrated: bool  # the harness merges its agents' patches (`agent_patches`) into the checkpoint states
    serial: bool = False  # its agents build on the integrated state one after another; the others work privately
    managed: bool = False  # a manager model who writes no code briefs the agents and may run them again


ALL = (
    Protocol("single", "Single", multi_agent=False, integrated=False),
    Protocol("serial_specialists", "Serial", multi_agent=True, integrated=True, serial=True),
    Protocol("async_private", "Async-Private", multi_agent=True, integrated=True),
    Protocol("caid_manager", "Async-RO-Manager", multi_agent=True, integrated=True, managed=True),
    Protocol("async_manager", "Async-Manager", multi_agent=True, integrated=False, managed=True),
)

PROTOCOLS = tuple(p.protocol_id for p in ALL)
MULTI_AGENT_PROTOCOLS = tuple(p.protocol_id for p in ALL if p.multi_agent)
INTEGRATED_PROTOCOLS = tuple(p.protocol_id for p in ALL if p.integrated)
SERIAL_PROTOCOLS = tuple(p.protocol_id for p in ALL if p.serial)
MANAGER_PROTOCOLS = tuple(p.protocol_id for p in ALL if p.managed)
ONE_AT_A_TIME_PROTOCOLS = tuple(p.protocol_id for p in ALL if p.serial or not p.multi_agent)  # one agent runs at a time

_DISPLAY_NAMES = {p.protocol_id: p.display_name for p in ALL}


def display_name(protocol_id: str) -> str:
    """The name tables show for a protocol (`caid_manager` -> `Async-RO-Manager`); an unknown id is shown as is."""
    return _DISPLAY_NAMES.get(protocol_id, protocol_id)
