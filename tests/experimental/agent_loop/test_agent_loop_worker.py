"""The agent-loop registry and AgentLoopWorker (in this process, no Ray): per-row ``agent_name`` dispatch, user
loops registered by ``_target_`` with constructor kwargs, sampling settings per batch, and the batch it returns."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from tests.support.models import tiny_model_path
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopOutput,
    get_agent_loop_spec,
    register_agent_loop_config,
)
from verl.experimental.agent_loop.server_manager import LocalServerHandle
from verl.experimental.agent_loop.worker import AgentLoopWorker
from verl.protocol import DataProto
from verl.trainer.config.loader import load_config
from verl.workers.rollout.async_server import TokenOutput


class EchoLoop(AgentLoopBase):
    """A user loop: one request, then a fixed suffix (masked) built from its constructor kwarg."""

    def __init__(self, *args, suffix_id: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.suffix_id = suffix_id

    async def run(self, sampling_params, **kwargs) -> AgentLoopOutput:
        prompt = [int(t) for t in kwargs["raw_prompt_ids"]]
        output = await self.server_manager.generate(
            request_id="echo", prompt_ids=prompt, sampling_params=sampling_params
        )
        response = output.token_ids + [self.suffix_id]
        return AgentLoopOutput(
            prompt_ids=prompt,
            response_ids=response,
            response_mask=[1] * len(output.token_ids) + [0],
            response_logprobs=None if output.log_probs is None else output.log_probs + [0.0],
            num_turns=3,
            extra_fields={"echo": True},
        )


class RecordingServer:
    """An in-process server answering every request with ``[7, 8]`` and recording the sampling settings."""

    def __init__(self):
        self.sampling: list[dict] = []

    def generate(self, prompt_ids, sampling_params, request_id):
        self.sampling.append(dict(sampling_params))
        log_probs = [-0.5, -0.25] if sampling_params.get("logprobs", True) else None
        return TokenOutput(token_ids=[7, 8], log_probs=log_probs, stop_reason="stop")


@pytest.fixture
def loop_config(tmp_path):
    path = tmp_path / "loops.yaml"
    path.write_text(f"- name: echo\n  _target_: {__name__}.EchoLoop\n  suffix_id: 5\n")
    return load_config(
        [
            f"actor_rollout_ref.model.path={tiny_model_path('llama')}",
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.temperature=0.7",
            "actor_rollout_ref.rollout.top_p=0.9",
            "actor_rollout_ref.rollout.calculate_log_probs=True",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={path}",
            "data.max_prompt_length=8",
            "data.max_response_length=6",
        ],
        config_name="ppo_demo",  # GRPO, fp32 rollout, packed sequences batched by tokens
    )


def batch(names: list[str | None], meta_info: dict) -> DataProto:
    prompts = [[1, 2, 3], [4, 5]]
    raw = np.empty(2, dtype=object)
    raw[:] = prompts
    non_tensors = {"raw_prompt_ids": raw, "index": np.array([10, 11], dtype=object)}
    if any(names):
        non_tensors["agent_name"] = np.array(names, dtype=object)
    return DataProto.from_dict(
        tensors={"input_ids": torch.zeros(2, 8, dtype=torch.long)}, non_tensors=non_tensors, meta_info=meta_info
    )


def test_rows_pick_their_loop_and_the_batch_has_the_sync_keys(loop_config):
    server = RecordingServer()
    worker = AgentLoopWorker(loop_config, [LocalServerHandle(server)])
    output = asyncio.run(worker.generate_sequences(batch(["echo", None], {"eos_token_id": 2, "pad_token_id": 0})))
    t = output.batch
    assert t["responses"].tolist() == [[7, 8, 5, 0, 0, 0], [7, 8, 0, 0, 0, 0]]  # echo appends 5; single turn not
    assert t["response_mask"].tolist() == [[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]]
    assert t["prompts"].tolist() == [[0, 0, 0, 0, 0, 1, 2, 3], [0, 0, 0, 0, 0, 0, 4, 5]]
    assert t["rollout_log_probs"][1].tolist() == [-0.5, -0.25, 0, 0, 0, 0]
    assert output.non_tensor_batch["index"].tolist() == [10, 11]
    assert output.non_tensor_batch["__num_turns__"].tolist() == [3, 2]
    assert output.non_tensor_batch["echo"].tolist() == [True, None]
    assert len(output.meta_info["metrics"]) == 2
    assert server.sampling[0] == {"temperature": 0.7, "top_p": 0.9, "top_k": -1, "logprobs": True}


def test_greedy_and_validation_sampling(loop_config):
    server = RecordingServer()
    worker = AgentLoopWorker(loop_config, [LocalServerHandle(server)])
    asyncio.run(worker.generate_sequences(batch([None, None], {"do_sample": False})))
    asyncio.run(worker.generate_sequences(batch([None, None], {"validate": True})))  # val_kwargs: greedy
    assert all(s["temperature"] == 0.0 for s in server.sampling)
    assert server.sampling[-1]["max_tokens"] == 6  # single_turn_agent asks for the whole response budget


def test_registry_lookups(tmp_path):
    path = tmp_path / "loops.yaml"
    path.write_text(f"- name: echo2\n  _target_: {__name__}.EchoLoop\n  suffix_id: 9\n")
    assert register_agent_loop_config(str(path)) == ["echo2"]
    cls, kwargs = get_agent_loop_spec("echo2")
    assert cls is EchoLoop and kwargs == {"suffix_id": 9}
    assert get_agent_loop_spec("tool_agent")[0].__name__ == "ToolAgentLoop"
    with pytest.raises(ValueError, match="registered: .*single_turn_agent.*tool_agent"):
        get_agent_loop_spec("no_such_agent")
    path.write_text("- name: broken\n")
    with pytest.raises(ValueError, match="needs 'name' and '_target_'"):
        register_agent_loop_config(str(path))
