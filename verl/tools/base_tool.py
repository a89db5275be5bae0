"""``BaseTool``: the interface of a tool the model can call (verl's ``verl.tools.base_tool``).

The agent loop drives one instance per call: ``create`` (per trajectory state, from the row's
``tools_kwargs[<name>].create_kwargs``) -> ``execute`` (the parsed arguments) -> ``release``. ``calc_reward``
scores the instance's state, e.g. the last answer submitted.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse


class BaseTool:
    """A tool: ``config`` is the ``config`` mapping of its YAML entry; ``tool_schema`` its OpenAI function schema
    (subclasses may build it in :meth:`get_openai_tool_schema` instead)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None):
        self.config = dict(config or {})
        self.tool_schema = tool_schema or self.get_openai_tool_schema()
        if self.tool_schema is None:
            raise ValueError(f"{type(self).__name__}: no tool_schema given and get_openai_tool_schema() returned None")
        self.name = self.tool_schema.function.name

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema | None:
        """The schema shown to the model."""
        return getattr(self, "tool_schema", None)

    async def create(self, instance_id: str | None = None, **kwargs) -> tuple[str, ToolResponse]:
        """Start an instance (per-trajectory state); returns its id and an optional response for the model."""
        return instance_id or str(uuid4()), ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        """Run the call with the parsed ``parameters``; returns ``(response, step reward, metrics)``."""
        return ToolResponse(text="Updated the tool state."), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        """The reward of the instance's current state."""
        return 0.0

    async def release(self, instance_id: str, **kwargs) -> None:
        """Free the instance's state."""
