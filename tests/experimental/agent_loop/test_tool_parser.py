"""The hermes tool-call parser: well-formed calls parse; every malformed one becomes a call with an error."""

from __future__ import annotations

import json

import pytest

from verl.experimental.agent_loop.tool_parser import FunctionCall, HermesToolParser, ToolParser


@pytest.fixture
def parser():
    return ToolParser.get_tool_parser("hermes", tokenizer=None)


def test_parses_calls_and_keeps_the_other_text(parser):
    text = (
        "Let me compute.\n<tool_call>\n"
        + json.dumps({"name": "calculator", "arguments": {"expression": "1 + 2"}})
        + "\n</tool_call>\n<tool_call>"
        + json.dumps({"name": "search", "arguments": '{"q": "verl"}'})  # arguments given as a JSON string
        + "</tool_call>"
    )
    content, calls = parser.parse(text)
    assert content == "Let me compute."
    assert calls == [
        FunctionCall(name="calculator", arguments='{"expression": "1 + 2"}'),
        FunctionCall(name="search", arguments='{"q": "verl"}'),
    ]
    assert parser.parse("no call here") == ("no call here", [])


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ("<tool_call>{name: calculator}</tool_call>", "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'needs a "name"'),
        ('<tool_call>["calculator"]</tool_call>', 'needs a "name"'),
        ('<tool_call>{"name": "calculator", "arguments": [1, 2]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "calculator", "arguments": "1 + 2"}</tool_call>', "not a JSON object"),
        ('Sure <tool_call>{"name": "calculator", "arguments": {}}', "not closed"),
    ],
)
def test_malformed_calls_carry_an_error(parser, block, error):
    _, calls = parser.parse(block)
    assert len(calls) == 1 and calls[0].error is not None and error in calls[0].error


def test_unknown_format_lists_the_registered_ones():
    with pytest.raises(ValueError, match="registered: \\['hermes'\\]"):
        ToolParser.get_tool_parser("mistral", tokenizer=None)


def test_tools_prompt_shows_every_schema_and_the_format():
    schemas = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d"}} for i in range(2)]
    prompt = HermesToolParser(tokenizer=None).tools_prompt(schemas)
    assert all(json.dumps(schema) in prompt for schema in schemas)
    assert "<tool_call>" in prompt and "</tool_call>" in prompt
