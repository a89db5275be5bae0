"""Prompt checks and output assembly against hand-built tensors."""

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.workers.rollout.batch import assemble_output, check_prompts, pad_responses, right_pad


def _prompts(input_ids, attention_mask):
    input_ids = torch.tensor(input_ids)
    attention_mask = torch.tensor(attention_mask)
    return DataProto.from_dict(
        tensors=dict(input_ids=input_ids, attention_mask=attention_mask),
        non_tensors={"uid": np.array(["a", "b"], dtype=object)},
        meta_info={"k": 1},
    )


def test_check_prompts_strips_left_padding():
    prompts = _prompts([[0, 0, 5, 6], [7, 8, 9, 10]], [[0, 0, 1, 1], [1, 1, 1, 1]])
    assert check_prompts(prompts, 4, 2, 8, 100) == [[5, 6], [7, 8, 9, 10]]


@pytest.mark.parametrize(
    "ids, mask, kwargs, message",
    [
        ([[0, 0, 0], [1, 2, 3]], [[0, 0, 0], [1, 1, 1]], {}, "row 0 is empty"),
        ([[1, 2, 3], [1, 2, 3]], [[1, 1, 1], [1, 1, 1]], {"prompt_length": 2}, r"3 tokens > rollout.prompt_length=2"),
        ([[1, 2, 3], [1, 2, 3]], [[1, 1, 1], [1, 1, 1]], {"max_model_len": 4}, r"rollout.max_model_len=4"),
        ([[1, 2, 3], [1, 2, 500]], [[1, 1, 1], [1, 1, 1]], {}, r"row 1 has token id 500 outside the vocabulary"),
        ([[1, 2, 3], [1, -1, 3]], [[1, 1, 1], [1, 1, 1]], {}, r"token id -1"),
        ([[1, 2, 0], [1, 2, 3]], [[1, 1, 0], [1, 1, 1]], {}, "row 0 is not left-padded"),
    ],
)
def test_check_prompts_rejects_bad_rows(ids, mask, kwargs, message):
    args = dict(prompt_length=8, response_length=2, max_model_len=64, vocab_size=100)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        check_prompts(_prompts(ids, mask), **args)


def test_out_of_vocab_id_under_padding_is_ignored():
    prompts = _prompts([[999, 5, 6], [1, 2, 3]], [[0, 1, 1], [1, 1, 1]])
    assert check_prompts(prompts, 8, 2, 64, 100) == [[5, 6], [1, 2, 3]]


def test_right_pad():
    out = right_pad([[1, 2], [], [3, 4, 5, 6]], 3, 9, torch.long)
    assert out.tolist() == [[1, 2, 9], [9, 9, 9], [3, 4, 5]]
    assert right_pad([[], []], 2, 0.5, torch.float32).tolist() == [[0.5, 0.5], [0.5, 0.5]]
    assert right_pad([], 4, 0, torch.long).shape == (0, 4)


def test_pad_responses_masks_exactly_the_returned_tokens():
    responses, mask, log_probs = pad_responses([[7, 8], [], [1, 2, 3, 4]], [[-0.5, -1.0], [], [-1, -2, -3, -4]], 3, 0)
    assert responses.tolist() == [[7, 8, 0], [0, 0, 0], [1, 2, 3]]
    assert mask.dtype == torch.long and mask.tolist() == [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
    assert log_probs.dtype == torch.float32 and log_probs.tolist() == [[-0.5, -1.0, 0.0], [0, 0, 0], [-1, -2, -3]]
    assert pad_responses([[5]], None, 2, 9)[2] is None


def test_assemble_output_repeats_prompts_and_builds_positions():
    prompts = _prompts([[0, 5, 6], [7, 8, 9]], [[0, 1, 1], [1, 1, 1]])
    responses = torch.tensor([[11, 2, 2], [12, 13, 14], [15, 2, 2], [16, 17, 2]])
    response_mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 0], [1, 1, 1]])
    log_probs = torch.full((4, 3), -0.5)
    out = assemble_output(prompts, 2, responses, response_mask, log_probs)
    assert out.batch["prompts"].tolist() == [[0, 5, 6], [0, 5, 6], [7, 8, 9], [7, 8, 9]]
    assert out.batch["input_ids"][1].tolist() == [0, 5, 6, 12, 13, 14]
    assert out.batch["attention_mask"][0].tolist() == [0, 1, 1, 1, 1, 0]
    # prompt positions from the mask (0 under padding), then last prompt position + 1, 2, 3
    assert out.batch["position_ids"][0].tolist() == [0, 0, 1, 2, 3, 4]
    assert out.batch["position_ids"][2].tolist() == [0, 1, 2, 3, 4, 5]
    assert out.non_tensor_batch["uid"].tolist() == ["a", "a", "b", "b"]
    assert out.meta_info == {"k": 1}
    assert out.batch["rollout_log_probs"].dtype == torch.float32
