"""``rollout.mode`` / ``rollout.agent`` / ``rollout.multi_turn`` mistakes fail before Ray starts, naming the key or
file and the fix; the shipped multi-turn settings pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl.trainer.config.loader import load_config
from verl.trainer.config.validation import ConfigError

REPO = Path(__file__).resolve().parents[3]
TOOLS = REPO / "examples" / "agent_loop" / "config" / "tool_config" / "gsm8k_tool_config.yaml"
INTERACTION = REPO / "examples" / "agent_loop" / "config" / "interaction_config" / "gsm8k_interaction_config.yaml"
ASYNC = ["actor_rollout_ref.rollout.mode=async"]
MULTI_TURN = [*ASYNC, "actor_rollout_ref.rollout.multi_turn.enable=True", "data.return_raw_chat=True"]


def errors(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    return str(info.value)


def test_shipped_multi_turn_settings_validate():
    config = load_config(
        [
            *MULTI_TURN,
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={TOOLS}",
            f"actor_rollout_ref.rollout.multi_turn.interaction_config_path={INTERACTION}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        ]
    )
    assert config.actor_rollout_ref.rollout.multi_turn.format == "hermes"


def test_mode_and_backend_combinations():
    assert "has no async server" in errors([*ASYNC, "actor_rollout_ref.rollout.name=hf"])
    assert "available: ['vllm']" in errors([*ASYNC, "actor_rollout_ref.rollout.name=hf"])
    assert "set actor_rollout_ref.rollout.mode=async" in errors(["actor_rollout_ref.rollout.multi_turn.enable=True"])
    message = errors([*ASYNC, "actor_rollout_ref.rollout.multi_turn.enable=True"])
    assert "set data.return_raw_chat=True" in message
    message = errors([*ASYNC, f"actor_rollout_ref.rollout.multi_turn.tool_config_path={TOOLS}"])
    assert "multi_turn.enable=False; enable it" in message


def test_config_files_are_checked(tmp_path):
    message = errors([*MULTI_TURN, f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tmp_path / 'none.yaml'}"])
    assert "tool_config_path" in message and "is not a file" in message
    bad = tmp_path / "tools.yaml"
    bad.write_text("tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kToool\n")
    message = errors([*MULTI_TURN, f"actor_rollout_ref.rollout.multi_turn.tool_config_path={bad}"])
    assert "has no class 'Gsm8kToool'" in message
    bad.write_text("interaction:\n  - name: x\n    class_name: verl.tools.gsm8k_tool.Gsm8kTool\n")
    message = errors([*MULTI_TURN, f"actor_rollout_ref.rollout.multi_turn.interaction_config_path={bad}"])
    assert "not a subclass of verl.interactions.base.BaseInteraction" in message


def test_agent_loop_names_and_formats(tmp_path):
    message = errors([*ASYNC, "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agnt"])
    assert "default_agent_loop='tool_agnt' is not registered" in message and "'tool_agent'" in message
    loops = tmp_path / "loops.yaml"
    loops.write_text("- name: mine\n  _target_: verl.experimental.agent_loop.SingleTurnAgentLoop\n")
    load_config(
        [
            *ASYNC,
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=mine",
        ]
    )
    loops.write_text("- name: mine\n  _target_: verl.experimental.agent_loop.NoSuchLoop\n")
    assert "cannot be imported" in errors([*ASYNC, f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}"])
    assert "registered: ['hermes']" in errors([*ASYNC, "actor_rollout_ref.rollout.multi_turn.format=qwen"])
    assert "tool_response_truncate_side" in errors(
        ["actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=up"]
    )
