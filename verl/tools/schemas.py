"""OpenAI function-calling schemas of tools and tool calls, and what a tool returns (verl's ``verl.tools.schemas``).

A tool schema is what the chat template shows the model (``{"type": "function", "function": {"name",
"description", "parameters": <JSON schema>}}``); a tool call is what the parser reads back from the model's text.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class OpenAIFunctionPropertySchema(BaseModel):
    """One parameter of a function: its JSON type, description and allowed values."""

    model_config = ConfigDict(extra="allow")

    type: str
    description: str | None = None
    enum: list[str] | None = None


class OpenAIFunctionParametersSchema(BaseModel):
    """The parameters object of a function (a JSON schema of type ``object``)."""

    model_config = ConfigDict(extra="allow")

    type: str = "object"
    properties: dict[str, OpenAIFunctionPropertySchema] = {}
    required: list[str] = []


class OpenAIFunctionSchema(BaseModel):
    """A function: name, description and parameters."""

    name: str
    description: str = ""
    parameters: OpenAIFunctionParametersSchema = OpenAIFunctionParametersSchema()
    strict: bool = False


class OpenAIFunctionToolSchema(BaseModel):
    """A tool in OpenAI format: ``{"type": "function", "function": {...}}``."""

    type: str = "function"
    function: OpenAIFunctionSchema


class OpenAIFunctionParsedSchema(BaseModel):
    """A parsed call: the function name and its arguments as a JSON string (as the model wrote them)."""

    name: str
    arguments: str


class OpenAIFunctionToolCall(BaseModel):
    """A tool call in OpenAI format."""

    id: str
    type: Literal["function"] = "function"
    function: OpenAIFunctionParsedSchema


class ToolResponse(BaseModel):
    """What a tool gives back to the model: text (and, for multi-modal tools, images or videos)."""

    text: str | None = None
    image: Any = None
    video: Any = None

    @classmethod
    def coerce(cls, value: Any) -> ToolResponse:
        """A ``ToolResponse`` from what ``BaseTool.execute`` returned: a ``ToolResponse``, a dict or a string."""
        if isinstance(value, ToolResponse):
            return value
        if isinstance(value, dict):
            return cls(**value)
        return cls(text="" if value is None else str(value))
