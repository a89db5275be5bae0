"""``pad_heads``: the tensor-parallel padded copy of SmolLM2 computes the same function as the original."""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from tests.support.models import smollm2_path, tp_padded_model_path


def test_padded_smollm2_has_tp_divisible_heads_and_the_same_logits():
    padded = tp_padded_model_path(smollm2_path(), 2)
    config = AutoConfig.from_pretrained(padded)
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (12, 4, 64)
    ids = torch.tensor([[1, 504, 3287, 314, 253, 1345, 30, 2]])
    with torch.no_grad():
        expected = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32)(input_ids=ids).logits
        actual = AutoModelForCausalLM.from_pretrained(padded, dtype=torch.float32)(input_ids=ids).logits
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
