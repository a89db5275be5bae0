"""Gsm8kInteraction and the interaction YAML: a wrong answer gets another turn, a right one ends the episode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from verl.interactions.gsm8k_interaction import CORRECT, INCORRECT, Gsm8kInteraction
from verl.interactions.utils.interaction_registry import initialize_interactions_from_config

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "agent_loop" / "config" / "interaction_config" / "gsm8k_interaction_config.yaml"


def test_wrong_then_right_answer():
    interaction = Gsm8kInteraction({"name": "gsm8k"})

    async def episode():
        instance = await interaction.start_interaction(ground_truth="72")
        wrong = await interaction.generate_response(instance, [{"role": "assistant", "content": "It is 70."}])
        right = await interaction.generate_response(
            instance, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "So #### 72"}]
        )
        await interaction.finalize_interaction(instance)
        return wrong, right

    wrong, right = asyncio.run(episode())
    assert wrong == (False, INCORRECT, 0.0, {})
    assert right == (True, CORRECT, 1.0, {})
    assert interaction._instance_dict == {}


def test_config_builds_named_interactions(tmp_path):
    interactions = initialize_interactions_from_config(str(CONFIG))
    assert list(interactions) == ["gsm8k"] and isinstance(interactions["gsm8k"], Gsm8kInteraction)
    assert interactions["gsm8k"].name == "gsm8k"
    bad = tmp_path / "bad.yaml"
    bad.write_text("interaction:\n  - class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction\n")
    with pytest.raises(ValueError, match="needs a 'name'"):
        initialize_interactions_from_config(str(bad))
    bad.write_text("interaction:\n  - name: x\n    class_name: verl.tools.gsm8k_tool.Gsm8kTool\n")
    with pytest.raises(ValueError, match="not a subclass of verl.interactions.base.BaseInteraction"):
        initialize_interactions_from_config(str(bad))
