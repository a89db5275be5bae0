"""Agent loops for ``actor_rollout_ref.rollout.mode=async`` (verl's ``verl.experimental.agent_loop``).

``AgentLoopManager`` replaces the worker group's batched ``generate_sequences``: it wakes the inference servers
in the workers, runs one agent loop per sample in ``AgentLoopWorker`` actors, and puts the servers back to sleep.
Built-in loops: ``single_turn_agent`` and ``tool_agent``; user loops register with ``@register(name)`` or through
``rollout.agent.agent_loop_config_path``. See docs/agent_loop.md.
"""

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    get_agent_loop_spec,
    register,
    registered_agent_loops,
)
from verl.experimental.agent_loop.manager import AgentLoopManager
from verl.experimental.agent_loop.server_manager import AsyncLLMServerManager, ServerHandle
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.experimental.agent_loop.worker import AgentLoopWorker

__all__ = [
    "AgentLoopBase",
    "AgentLoopManager",
    "AgentLoopMetrics",
    "AgentLoopOutput",
    "AgentLoopWorker",
    "AsyncLLMServerManager",
    "ServerHandle",
    "SingleTurnAgentLoop",
    "ToolAgentLoop",
    "get_agent_loop_spec",
    "register",
    "registered_agent_loops",
]
