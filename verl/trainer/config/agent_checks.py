"""Checks of ``rollout.mode``, ``rollout.agent`` and ``rollout.multi_turn`` before Ray starts.

The tool, interaction and agent-loop YAML files are read and their classes imported here, so a wrong path, a
misspelled class or a malformed entry fails in seconds with the file and the entry named.
"""

from __future__ import annotations

from verl.trainer.config.root import PPOConfig

KEY = "actor_rollout_ref.rollout"


def _file_errors(multi_turn) -> list[str]:
    from verl.interactions.utils.interaction_registry import check_interaction_classes, load_interaction_specs
    from verl.tools.utils.tool_registry import check_tool_classes, load_tool_specs

    errors = []
    if multi_turn.tool_config_path:
        try:
            check_tool_classes(load_tool_specs(multi_turn.tool_config_path), multi_turn.tool_config_path)
        except (ValueError, ImportError) as exc:
            errors.append(f"{KEY}.multi_turn.tool_config_path: {exc}")
    if multi_turn.interaction_config_path:
        path = multi_turn.interaction_config_path
        try:
            check_interaction_classes(load_interaction_specs(path), path)
        except (ValueError, ImportError) as exc:
            errors.append(f"{KEY}.multi_turn.interaction_config_path: {exc}")
    return errors


def _agent_loop_errors(agent) -> list[str]:
    from verl.experimental.agent_loop.agent_loop import read_agent_loop_config, registered_agent_loops, resolve_class

    names = set(registered_agent_loops())
    if agent.agent_loop_config_path:
        try:
            loops = read_agent_loop_config(agent.agent_loop_config_path)
            for spec in loops.values():
                resolve_class(spec["_target_"])
        except ValueError as exc:
            return [f"{KEY}.agent.agent_loop_config_path: {exc}"]
        names |= set(loops)
    if agent.default_agent_loop not in names:
        return [
            f"{KEY}.agent.default_agent_loop={agent.default_agent_loop!r} is not registered; registered: "
            f"{sorted(names)} (user loops register through {KEY}.agent.agent_loop_config_path)"
        ]
    return []


def rollout_mode_errors(cfg: PPOConfig) -> list[str]:
    """Inconsistent async/multi-turn settings, unusable config files, unknown loop names or formats."""
    rollout = cfg.actor_rollout_ref.rollout
    multi_turn = rollout.multi_turn
    errors = []
    if multi_turn.enable and rollout.mode != "async":
        errors.append(f"{KEY}.multi_turn.enable=True runs in the agent loop: set {KEY}.mode=async")
    configured = [k for k in ("tool_config_path", "interaction_config_path") if getattr(multi_turn, k)]
    if configured and not multi_turn.enable:
        errors.append(f"{KEY}.multi_turn.{configured[0]} is set but {KEY}.multi_turn.enable=False; enable it")
    if rollout.mode != "async":
        return errors
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.workers.rollout.async_server import async_server_names

    if rollout.name not in async_server_names():
        errors.append(
            f"{KEY}.name={rollout.name!r} has no async server for {KEY}.mode=async; available: "
            f"{async_server_names()} (or set {KEY}.mode=sync)"
        )
    if multi_turn.enable and not cfg.data.return_raw_chat:
        errors.append(f"{KEY}.multi_turn.enable=True needs the rows' chat messages: set data.return_raw_chat=True")
    if multi_turn.format not in ToolParser.formats():
        errors.append(f"{KEY}.multi_turn.format={multi_turn.format!r} is unknown; registered: {ToolParser.formats()}")
    return errors + _file_errors(multi_turn) + _agent_loop_errors(rollout.agent)
