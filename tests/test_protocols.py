"""The protocols are named once, in `asyncodebench/dataset/protocols.py`; the files that must stand on their own (the
protocol table the dataset is built from, the published JSON schemas, the card's field tables) agree with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from asyncodebench.dataset import protocols
from asyncodebench.dataset.protocols import INTEGRATED_PROTOCOLS, MULTI_AGENT_PROTOCOLS, PROTOCOLS, display_name

ROOT = Path(__file__).resolve().parent.parent


def test_the_five_protocols_in_release_order_with_their_display_names() -> None:
    assert PROTOCOLS == ("single", "serial_specialists", "async_private", "caid_manager", "async_manager")
    assert [display_name(p) for p in PROTOCOLS] == ["Single", "Serial", "Async-Private", "Async-RO-Manager",
                                                    "Async-Manager"]
    assert display_name("not_a_protocol") == "not_a_protocol"  # shown as given, never a crash in a report
    assert MULTI_AGENT_PROTOCOLS == PROTOCOLS[1:]
    assert INTEGRATED_PROTOCOLS == ("serial_specialists", "async_private", "caid_manager")
    assert protocols.SERIAL_PROTOCOLS == ("serial_specialists",)
    assert protocols.MANAGER_PROTOCOLS == ("caid_manager", "async_manager")
    assert protocols.ONE_AT_A_TIME_PROTOCOLS == ("single", "serial_specialists")


def test_the_agent_runner_reads_its_protocols_from_the_registry() -> None:
    """Every protocol of the registry has a runner, the ones it marks managed in `managed.py`."""
    from asyncodebench.agents import managed
    from asyncodebench.agents.protocols import IMPLEMENTED, RUNNERS

    assert IMPLEMENTED == PROTOCOLS
    assert tuple(managed.RUNNERS) == protocols.MANAGER_PROTOCOLS and not set(RUNNERS) & set(managed.RUNNERS)


def test_the_protocol_table_names_the_same_protocols_in_the_same_order() -> None:
    table = yaml.safe_load((ROOT / "data" / "protocols.yaml").read_text(encoding="utf-8"))
    assert [(p["protocol_id"], p["display_name"]) for p in table["protocols"]] == \
        [(p.protocol_id, p.display_name) for p in protocols.ALL]


def test_the_schemas_list_the_same_protocols() -> None:
    prediction = json.loads((ROOT / "schemas" / "prediction.schema.json").read_text(encoding="utf-8"))
    scenario = json.loads((ROOT / "schemas" / "scenario.schema.json").read_text(encoding="utf-8"))
    assert tuple(prediction["properties"]["protocol"]["enum"]) == PROTOCOLS
    assert tuple(scenario["properties"]["protocol"]["enum"]) == PROTOCOLS
    assert tuple(scenario["properties"]["assignments_source_protocol"]["anyOf"][0]["enum"]) == PROTOCOLS
    alternatives = re.search(r"/\(([^)]*)\)\$$", scenario["properties"]["scenario_id"]["pattern"]).group(1)
    assert tuple(alternatives.split("|")) == PROTOCOLS


def test_the_field_tables_of_the_card_show_the_same_display_names() -> None:
    (line,) = [line for line in (ROOT / "docs" / "fields.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `display_name` |")]
    assert re.findall(r"`([^`]+)`", line.split("|")[3]) == [display_name(p) for p in PROTOCOLS]
