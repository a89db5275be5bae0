"""``Gsm8kTool``: the model submits its GSM8K answer and gets told whether it is right (verl's demo tool).

Schema (``calc_gsm8k_reward``, one string parameter ``answer``) comes from the tool YAML; the row's
``tools_kwargs.calc_gsm8k_reward.create_kwargs.ground_truth`` holds the answer. The step reward is 0 for an
answer better than the previous one and -0.05 otherwise (a penalty for resubmitting without improvement).
"""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.reward_score import gsm8k

NO_IMPROVEMENT_PENALTY = -0.05


def parse_parameters(parameters: Any) -> dict[str, Any]:
    """Arguments as a dict: the agent loop passes a dict, verl's older callers a JSON string."""
    if isinstance(parameters, dict):
        return parameters
    try:
        parsed = json.loads(parameters)
    except (TypeError, json.JSONDecodeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


class Gsm8kTool(BaseTool):
    """Scores a submitted GSM8K answer against the row's ground truth with the flexible GSM8K scorer."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None):
        super().__init__(config, tool_schema)
        self._instance_dict: dict[str, dict[str, Any]] = {}

    async def create(
        self, instance_id: str | None = None, ground_truth: str | None = None, **kwargs
    ) -> tuple[str, ToolResponse]:
        instance_id = instance_id or str(uuid4())
        self._instance_dict[instance_id] = {"response": "", "ground_truth": ground_truth, "reward": 0.0}
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: Any, **kwargs) -> tuple[ToolResponse, float, dict]:
        answer = parse_parameters(parameters).get("answer", "")
        answer = answer if isinstance(answer, str) else str(answer)
        state = self._instance_dict[instance_id]
        state["response"] = answer if answer.startswith("#### ") else "#### " + answer
        reward = await self.calc_reward(instance_id)
        step_reward = 0.0 if reward > state["reward"] else NO_IMPROVEMENT_PENALTY
        state["reward"] = reward
        return ToolResponse(text=f"Current parsed answer={answer!r} reward={reward}"), step_reward, {}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        state = self._instance_dict[instance_id]
        return gsm8k.compute_score(
            state["response"], state["ground_truth"], method="flexible", format_score=0.0, score=1.0
        )

    async def release(self, instance_id: str, **kwargs) -> None:
        self._instance_dict.pop(instance_id, None)
