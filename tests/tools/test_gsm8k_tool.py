"""Gsm8kTool: per-instance ground truth, the flexible GSM8K score and the no-improvement penalty."""

from __future__ import annotations

import asyncio

from verl.tools.gsm8k_tool import NO_IMPROVEMENT_PENALTY, Gsm8kTool
from verl.tools.schemas import OpenAIFunctionToolSchema

SCHEMA = OpenAIFunctionToolSchema.model_validate(
    {
        "type": "function",
        "function": {
            "name": "calc_gsm8k_reward",
            "description": "score an answer",
            "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
        },
    }
)


def test_rewards_follow_the_submitted_answers():
    tool = Gsm8kTool({}, SCHEMA)

    async def episode():
        first, _ = await tool.create(ground_truth="72")
        other, _ = await tool.create(ground_truth="5")
        results = []
        for instance, answer in ((first, "70"), (first, "72"), (first, "#### 72"), (other, {"answer": 5})):
            parameters = answer if isinstance(answer, dict) else {"answer": answer}
            response, step_reward, _ = await tool.execute(instance, parameters)
            results.append((response.text, step_reward, await tool.calc_reward(instance)))
        await tool.release(first)
        await tool.release(other)
        return results

    results = asyncio.run(episode())
    # wrong answer: no improvement over 0 -> penalty; right answer: improvement -> 0; the same again: penalty
    assert [r[1] for r in results] == [NO_IMPROVEMENT_PENALTY, 0.0, NO_IMPROVEMENT_PENALTY, 0.0]
    assert [r[2] for r in results] == [0.0, 1.0, 1.0, 1.0]
    assert "reward=1.0" in results[1][0]
    assert tool._instance_dict == {}
