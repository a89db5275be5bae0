"""Reading tool calls out of the model's text, by format (``rollout.multi_turn.format``).

``hermes`` (Qwen2.5, Hermes, and the instructions added for templates without tool support)::

    <tool_call>
    {"name": "calculator", "arguments": {"expression": "37 + 58"}}
    </tool_call>

A call that cannot be used (not JSON, no ``name``, ``arguments`` not an object, no closing tag) comes back as a
:class:`FunctionCall` with ``error`` set: the agent loop answers it with an error message, it never raises.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from verl.experimental.agent_loop.chat import tool_schema_json


class FunctionCall(BaseModel):
    """A parsed call: ``name`` and ``arguments`` (a JSON object as a string); ``error`` when it is malformed."""

    name: str = ""
    arguments: str = "{}"
    error: str | None = None


class ToolParser(ABC):
    """Parser of one tool-call format; registered by name with :meth:`register`."""

    _registry: dict[str, type[ToolParser]] = {}

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    @abstractmethod
    def parse(self, text: str) -> tuple[str, list[FunctionCall]]:
        """``(text without the calls, calls)`` of one model turn."""

    @abstractmethod
    def tools_prompt(self, tool_schemas: list[dict[str, Any]]) -> str:
        """Instructions that show the model the tools and this call format (for templates without tools)."""

    async def extract_tool_calls(self, responses_ids: list[int]) -> tuple[str, list[FunctionCall]]:
        """verl's entry point: decode the turn's ids and :meth:`parse` them."""
        return self.parse(self.tokenizer.decode(responses_ids, skip_special_tokens=True))

    @classmethod
    def register(cls, name: str) -> Callable[[type[ToolParser]], type[ToolParser]]:
        def decorator(subclass: type[ToolParser]) -> type[ToolParser]:
            cls._registry[name] = subclass
            return subclass

        return decorator

    @classmethod
    def get_tool_parser(cls, name: str, tokenizer: Any) -> ToolParser:
        """The parser of format ``name``; unknown names list the registered formats."""
        if name not in cls._registry:
            raise ValueError(
                f"unknown tool-call format {name!r} (rollout.multi_turn.format); registered: {sorted(cls._registry)}"
            )
        return cls._registry[name](tokenizer)

    @classmethod
    def formats(cls) -> list[str]:
        return sorted(cls._registry)


@ToolParser.register("hermes")
class HermesToolParser(ToolParser):
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, any number per turn."""

    start_tag = "<tool_call>"
    end_tag = "</tool_call>"
    _block = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    def parse(self, text: str) -> tuple[str, list[FunctionCall]]:
        calls = [self._parse_block(block) for block in self._block.findall(text)]
        content = self._block.sub("", text)
        if self.start_tag in content:  # an opening tag left without its closing tag
            calls.append(FunctionCall(error=f"the tool call is not closed with {self.end_tag}"))
            content = content[: content.index(self.start_tag)]
        return content.strip(), calls

    @staticmethod
    def _parse_block(block: str) -> FunctionCall:
        try:
            call = json.loads(block)
        except json.JSONDecodeError as exc:
            return FunctionCall(error=f"the tool call is not valid JSON ({exc.msg} at character {exc.pos})")
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            return FunctionCall(error='the tool call needs a "name" string and an "arguments" object')
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):  # some models write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return FunctionCall(name=call["name"], error='"arguments" is a string that is not a JSON object')
        if not isinstance(arguments, dict):
            return FunctionCall(name=call["name"], error='"arguments" must be a JSON object')
        return FunctionCall(name=call["name"], arguments=json.dumps(arguments, ensure_ascii=False))

    def tools_prompt(self, tool_schemas: list[dict[str, Any]]) -> str:
        return (
            "You can call tools. The available tools, as JSON function signatures:\n<tools>\n"
            f"{tool_schema_json(tool_schemas)}\n</tools>\n\n"
            "To call a tool, write a JSON object with the tool's name and its arguments between tags:\n"
            '<tool_call>\n{"name": <tool name>, "arguments": <JSON object of arguments>}\n</tool_call>\n'
            "The result comes back in the next message."
        )
