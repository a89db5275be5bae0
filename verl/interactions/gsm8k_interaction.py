"""``Gsm8kInteraction``: a user who checks the last assistant answer of a GSM8K problem.

Correct (flexible GSM8K scorer against ``interaction_kwargs.ground_truth``): "Your response is correct!" and the
episode ends with score 1. Otherwise the user asks the model to reflect and try again (score 0).
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.interactions.base import BaseInteraction
from verl.utils.reward_score import gsm8k

CORRECT = "Your response is correct!"
INCORRECT = "Your response is incorrect! You need to reflect on your answer and try again."


class Gsm8kInteraction(BaseInteraction):
    """Scores the last assistant message; ends the episode when it is right."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self._instance_dict: dict[str, dict[str, Any]] = {}

    async def start_interaction(self, instance_id: str | None = None, ground_truth: str | None = None, **kwargs) -> str:
        instance_id = instance_id or str(uuid4())
        self._instance_dict[instance_id] = {"response": "", "ground_truth": ground_truth, "reward": 0.0}
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs
    ) -> tuple[bool, str, float, dict[str, Any]]:
        content = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        state = self._instance_dict[instance_id]
        state["response"] = content if content.startswith("#### ") else "#### " + content
        reward = await self.calculate_score(instance_id)
        state["reward"] = reward
        if reward == 1.0:
            return True, CORRECT, reward, {}
        return False, INCORRECT, reward, {}

    async def calculate_score(self, instance_id: str, **kwargs) -> float:
        state = self._instance_dict[instance_id]
        return gsm8k.compute_score(
            state["response"], state["ground_truth"], method="flexible", format_score=0.0, score=1.0
        )

    async def finalize_interaction(self, instance_id: str, **kwargs) -> None:
        self._instance_dict.pop(instance_id, None)
