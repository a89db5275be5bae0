"""``single_turn_agent``: one model turn on the row's prompt, the agent-loop version of ``rollout.mode=sync``."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.experimental.agent_loop.chat import timer


@register("single_turn_agent")
class SingleTurnAgentLoop(AgentLoopBase):
    """Generates once from the dataset's own prompt tokens (``raw_prompt_ids``): the same ids ``sync`` uses."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        prompt_ids = [int(token) for token in kwargs["raw_prompt_ids"]]
        response_length = int(self.config.actor_rollout_ref.rollout.response_length)
        metrics: dict[str, float] = {}
        with timer("generate_sequences", metrics):
            output = await self.server_manager.generate(
                request_id=uuid4().hex,
                prompt_ids=prompt_ids,
                sampling_params={**sampling_params, "max_tokens": response_length},
            )
        response_ids = output.token_ids[:response_length]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=[1] * len(response_ids),
            response_logprobs=None if output.log_probs is None else output.log_probs[: len(response_ids)],
            num_turns=2,
            metrics=AgentLoopMetrics(**metrics),
        )
