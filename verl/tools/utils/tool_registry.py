"""Build the tools of a run from the YAML of ``rollout.multi_turn.tool_config_path`` (verl's format)::

    tools:
      - class_name: verl.tools.gsm8k_tool.Gsm8kTool
        config: {type: native}          # passed to the tool's constructor; ``type`` defaults to native
        tool_schema:                    # OpenAI function schema (optional when the class has a default)
          type: function
          function: {name: calc_gsm8k_reward, description: ..., parameters: {...}}

:func:`load_tool_specs` checks the file without building anything (the config checks run it before Ray starts);
:func:`initialize_tools_from_config` builds the tools.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema

TOOL_TYPES = ("native",)
"""Tool types of this build (verl also has ``mcp``, which needs an MCP client)."""


@dataclass
class ToolSpec:
    """One entry of the tool YAML, checked."""

    class_name: str
    config: dict[str, Any]
    tool_schema: OpenAIFunctionToolSchema | None


def get_tool_class(class_name: str) -> type:
    """The class at dotted path ``class_name`` (``package.module.Class``)."""
    module_name, _, attr = class_name.rpartition(".")
    if not module_name:
        raise ValueError(
            f"tool class_name {class_name!r} must be a dotted path such as verl.tools.gsm8k_tool.Gsm8kTool"
        )
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no class {attr!r} (tool class_name {class_name!r})") from None


def load_tool_specs(path: str) -> list[ToolSpec]:
    """Read and check the tool YAML at ``path``; errors name the file, the entry and the fix."""
    if not Path(path).is_file():
        raise ValueError(f"rollout.multi_turn.tool_config_path={path!r} is not a file")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    entries = raw.get("tools") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a top-level 'tools:' list of {{class_name, config, tool_schema}} entries")
    specs = []
    for index, entry in enumerate(entries):
        where = f"{path}: tools[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
            raise ValueError(f"{where} needs a 'class_name' (dotted path of a BaseTool subclass)")
        unknown = sorted(set(entry) - {"class_name", "config", "tool_schema"})
        if unknown:
            raise ValueError(f"{where} has unknown keys {unknown}; allowed: class_name, config, tool_schema")
        config = dict(entry.get("config") or {})
        tool_type = config.get("type", "native")
        if tool_type not in TOOL_TYPES:
            raise ValueError(f"{where}: config.type={tool_type!r} is not available; available: {list(TOOL_TYPES)}")
        schema = entry.get("tool_schema")
        try:
            tool_schema = OpenAIFunctionToolSchema.model_validate(schema) if schema is not None else None
        except Exception as exc:
            raise ValueError(f"{where}: tool_schema is not an OpenAI function schema: {exc}") from None
        specs.append(ToolSpec(class_name=entry["class_name"], config=config, tool_schema=tool_schema))
    return specs


def check_tool_classes(specs: list[ToolSpec], path: str) -> None:
    """Every ``class_name`` imports and is a :class:`BaseTool`; tool names are unique."""
    for spec in specs:
        cls = get_tool_class(spec.class_name)
        if not (isinstance(cls, type) and issubclass(cls, BaseTool)):
            raise ValueError(f"{path}: {spec.class_name} is not a subclass of verl.tools.base_tool.BaseTool")
    names = [spec.tool_schema.function.name for spec in specs if spec.tool_schema is not None]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{path}: tool names {duplicates} appear more than once; give each tool its own name")


def initialize_tools_from_config(tools_config_file: str) -> list[BaseTool]:
    """The tools listed in ``tools_config_file``, constructed as ``cls(config=..., tool_schema=...)``."""
    specs = load_tool_specs(tools_config_file)
    check_tool_classes(specs, tools_config_file)
    return [get_tool_class(spec.class_name)(config=spec.config, tool_schema=spec.tool_schema) for spec in specs]
