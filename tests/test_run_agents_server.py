"""The scripted OpenAI-compatible server: real HTTP, asked through the real `openai` client library."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from asyncodebench.agents.scripted_server import Reply, ScriptedServer, ScriptError, load_scripts, parse_scripts

SCRIPTS = {
    "core_agent": ["ls", {"content": "done", "commands": ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]}],
    "single/core_agent": [{"content": "thinking", "commands": []}],
}


def ask(server: ScriptedServer, agent: str, text: str = "hello", **extra: object) -> object:
    client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    return client.chat.completions.create(model=f"scripted/{agent}", messages=[{"role": "user", "content": text}],
                                          **extra)


def test_replies_are_replayed_in_order_as_tool_calls_with_usage() -> None:
    with ScriptedServer(parse_scripts(SCRIPTS)) as server:
        first = ask(server, "task/serial_specialists/core_agent", "x" * 400)
        second = ask(server, "task/serial_specialists/core_agent")
    call = first.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("bash", {"command": "ls"})
    assert first.usage.prompt_tokens == 100 and first.usage.completion_tokens == 1
    assert first.usage.total_tokens == 101
    assert second.choices[0].message.content == "done"
    assert json.loads(second.choices[0].message.tool_calls[0].function.arguments)["command"].startswith("echo COMPL")


def test_the_most_specific_key_wins_and_each_full_name_has_its_own_cursor() -> None:
    with ScriptedServer(parse_scripts(SCRIPTS)) as server:
        specific = ask(server, "task/single/core_agent")
        general = ask(server, "task/async_private/core_agent")
        other = ask(server, "other/async_private/core_agent")
        assert server.served == {"task/single/core_agent": 1, "task/async_private/core_agent": 1,
                                 "other/async_private/core_agent": 1}
    assert specific.choices[0].message.content == "thinking" and not specific.choices[0].message.tool_calls
    assert general.choices[0].message.tool_calls[0].function.arguments == other.choices[0].message.tool_calls[
        0].function.arguments


def test_a_used_up_script_and_an_unknown_agent_get_a_400_that_says_why() -> None:
    with ScriptedServer(parse_scripts(SCRIPTS)) as server:
        ask(server, "single/core_agent")
        with pytest.raises(openai.BadRequestError, match="used up: all 1 replies were given"):
            ask(server, "single/core_agent")
        with pytest.raises(openai.BadRequestError, match="no script for agent 'nobody'"):
            ask(server, "nobody")
        with pytest.raises(openai.BadRequestError, match="does not stream"):
            ask(server, "core_agent", stream=True)


def test_the_header_names_the_agent_when_given() -> None:
    with ScriptedServer({"api_agent": (Reply("", ("pwd",)),)}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0,
                               default_headers={"X-Scripted-Agent": "api_agent"})
        answer = client.chat.completions.create(model="anything", messages=[{"role": "user", "content": "hi"}])
    assert json.loads(answer.choices[0].message.tool_calls[0].function.arguments) == {"command": "pwd"}


@pytest.mark.parametrize("value, message", [
    ([], "give a JSON object"),
    ({"a": "ls"}, "must be a list of replies"),
    ({"a": [{"content": "x", "command": "ls"}]}, "'a' reply 1: give a bash command"),
    ({"a": ["ls", {"commands": [1]}]}, "'a' reply 2"),
])
def test_bad_scripts_are_refused_naming_the_reply(value: object, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        parse_scripts(value)


def test_a_scripts_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "scripts.json"
    path.write_text("{not json")
    with pytest.raises(ScriptError, match="not a readable JSON scripts file"):
        load_scripts(path)
