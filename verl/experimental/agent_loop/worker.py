"""``AgentLoopWorker``: a Ray actor that runs the agent loops of its share of a batch concurrently (asyncio).

Each row runs the loop named by its ``agent_name`` (or ``rollout.agent.default_agent_loop``) with the row's
non-tensor fields as keyword arguments. Sampling follows ``mode=sync`` (:func:`resolve_sampling`): the training
settings, ``val_kwargs`` for validation, greedy when ``meta_info["do_sample"]`` is False.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    TrainerConfigRef,
    get_agent_loop_spec,
    register_agent_loop_config,
)
from verl.experimental.agent_loop.server_manager import AsyncLLMServerManager, ServerHandle
from verl.experimental.agent_loop.trajectory import build_rollout_batch
from verl.protocol import DataProto
from verl.workers.rollout.sampling import SamplingSettings, resolve_sampling, resolve_special_ids


def sampling_params_of(settings: SamplingSettings, log_probs: bool) -> dict[str, Any]:
    """The per-request sampling dict of the servers (greedy is temperature 0); ``logprobs`` asks for the engine's
    log-probs of the sampled tokens (``rollout.calculate_log_probs``, as in ``sync``)."""
    if settings.greedy:
        return {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "logprobs": log_probs}
    return {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "top_k": settings.top_k,
        "logprobs": log_probs,
    }


class AgentLoopWorker:
    """Runs agent loops against ``server_handles`` (replica leaders) through one :class:`AsyncLLMServerManager`."""

    def __init__(self, config: Any, server_handles: list[ServerHandle]):
        from verl.workers.fsdp_workers import load_tokenizer

        self.config = config
        self.rollout_config = config.actor_rollout_ref.rollout
        self.server_manager = AsyncLLMServerManager(config, server_handles)
        self.tokenizer = load_tokenizer(config.actor_rollout_ref.model)
        self.processor = None
        path = self.rollout_config.agent.agent_loop_config_path
        if path:
            register_agent_loop_config(path)

    async def generate_sequences(self, batch: DataProto) -> DataProto:
        """The rollout batch of ``batch`` (one trajectory per row, in row order)."""
        eos_ids, pad_id = resolve_special_ids(batch.meta_info, self.tokenizer)
        settings = resolve_sampling(self.rollout_config, batch.meta_info, eos_ids, pad_id)
        sampling_params = sampling_params_of(settings, bool(self.rollout_config.calculate_log_probs))
        non_tensors = dict(batch.non_tensor_batch)
        default = self.rollout_config.agent.default_agent_loop
        names = non_tensors.get("agent_name", np.array([default] * len(batch), dtype=object))
        rows = [{key: values[i] for key, values in non_tensors.items()} for i in range(len(batch))]
        outputs = await asyncio.gather(
            *(self._run(str(name or default), sampling_params, row) for name, row in zip(names, rows))
        )
        output = build_rollout_batch(
            list(outputs),
            prompt_length=int(self.rollout_config.prompt_length),
            response_length=settings.response_length,
            pad_token_id=pad_id,
            non_tensors=non_tensors,
        )
        output.meta_info["metrics"] = [o.metrics.model_dump() for o in outputs]
        return output

    async def _run(self, agent_name: str, sampling_params: dict[str, Any], row: dict[str, Any]) -> AgentLoopOutput:
        cls, kwargs = get_agent_loop_spec(agent_name)
        agent_loop = cls(
            trainer_config=TrainerConfigRef(self.config),
            server_manager=self.server_manager,
            tokenizer=self.tokenizer,
            processor=self.processor,
            **kwargs,
        )
        return await agent_loop.run(dict(sampling_params), **row)
