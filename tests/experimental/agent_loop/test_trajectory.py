"""build_rollout_batch on the hand-worked example of its docstring, and the fields it adds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.trajectory import build_rollout_batch

PAD = 0


def test_padding_masks_and_positions():
    tool_turn = AgentLoopOutput(
        prompt_ids=[11, 12],
        response_ids=[21, 22, 31, 32, 23, 2],  # model, model, tool, tool, model, eos
        response_mask=[1, 1, 0, 0, 1, 1],
        response_logprobs=[-0.1, -0.2, 0.0, 0.0, -0.3, -0.4],
        num_turns=4,
        extra_fields={"num_tool_calls": 1},
    )
    single = AgentLoopOutput(prompt_ids=[13, 14, 15], response_ids=[24], response_mask=[1], num_turns=2)
    batch = build_rollout_batch(
        [tool_turn, single], prompt_length=4, response_length=8, pad_token_id=PAD,
        non_tensors={"uid": np.array(["a", "b"], dtype=object)},
    )  # fmt: skip
    t = batch.batch
    assert t["prompts"].tolist() == [[0, 0, 11, 12], [0, 13, 14, 15]]
    assert t["responses"].tolist() == [[21, 22, 31, 32, 23, 2, 0, 0], [24, 0, 0, 0, 0, 0, 0, 0]]
    assert t["response_mask"].tolist() == [[1, 1, 0, 0, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]
    assert t["attention_mask"].tolist() == [[0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0], [0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]]
    # prompt positions count real tokens from 0; response positions go on from the last prompt position
    assert t["position_ids"].tolist() == [[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]
    assert torch.equal(t["input_ids"], torch.cat([t["prompts"], t["responses"]], dim=-1))
    assert "rollout_log_probs" not in t.keys()  # one trajectory came without log-probs: none, as sync without them
    assert batch.non_tensor_batch["uid"].tolist() == ["a", "b"]
    assert batch.non_tensor_batch["__num_turns__"].tolist() == [4, 2]
    assert batch.non_tensor_batch["num_tool_calls"].tolist() == [1, None]


def test_a_prompt_longer_than_prompt_length_fails():
    output = AgentLoopOutput(prompt_ids=[1, 2, 3], response_ids=[4], response_mask=[1])
    with pytest.raises(ValueError, match="rollout.prompt_length=2"):
        build_rollout_batch([output], prompt_length=2, response_length=4, pad_token_id=PAD)


def test_log_probs_are_padded_with_zeros_when_every_trajectory_has_them():
    outputs = [
        AgentLoopOutput(prompt_ids=[1], response_ids=[2, 3, 4], response_mask=[1, 0, 1], response_logprobs=[-1, 0, -2]),
        AgentLoopOutput(prompt_ids=[1], response_ids=[5], response_mask=[1], response_logprobs=[-3]),
    ]
    batch = build_rollout_batch(outputs, prompt_length=2, response_length=4, pad_token_id=PAD)
    assert batch.batch["rollout_log_probs"].tolist() == [[-1, 0, -2, 0], [-3, 0, 0, 0]]
