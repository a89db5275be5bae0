"""Tools a model can call during multi-turn rollouts (verl's ``verl.tools``).

A tool is a :class:`~verl.tools.base_tool.BaseTool` with an OpenAI function schema; the tools of a run are listed
in the YAML of ``actor_rollout_ref.rollout.multi_turn.tool_config_path`` and built by
:func:`verl.tools.utils.tool_registry.initialize_tools_from_config`.
"""

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolCall, OpenAIFunctionToolSchema, ToolResponse

__all__ = ["BaseTool", "OpenAIFunctionToolCall", "OpenAIFunctionToolSchema", "ToolResponse"]
