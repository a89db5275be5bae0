"""``pad_heads``: the tensor-parallel padded copy of SmolLM2 computes the same function as the original."""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from tests.support.models import smollm2_path, tp_padded_model_path
from verl.models.mcore.pad_heads import drop_padding


def test_padded_smollm2_has_tp_divisible_heads_and_the_same_logits():
    padded = tp_padded_model_path(smollm2_path(), 2)
    config = AutoConfig.from_pretrained(padded)
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (12, 4, 64)
    ids = torch.tensor([[1, 504, 3287, 314, 253, 1345, 30, 2]])
    with torch.no_grad():
        expected = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32)(input_ids=ids).logits
        actual = AutoModelForCausalLM.from_pretrained(padded, dtype=torch.float32)(input_ids=ids).logits
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_drop_padding_gives_back_the_original_tensors_and_the_zero_padding():
    original = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32).state_dict()
    padded = AutoModelForCausalLM.from_pretrained(tp_padded_model_path(smollm2_path(), 2), dtype=torch.float32)
    kept, padding = drop_padding(padded.state_dict(), {k: v.shape for k, v in original.items()})
    assert set(kept) == set(original)
    assert all(torch.equal(kept[k], original[k]) for k in original)
    # 9 -> 12 query heads of 64 (q rows, o columns) and 3 -> 4 KV groups (k, v rows), in each of the 30 layers
    assert sorted({k.split(".")[-2] for k in padding}) == ["k_proj", "o_proj", "q_proj", "v_proj"]
    assert len(padding) == 4 * 30
    assert padding["model.layers.0.self_attn.q_proj.weight"].numel() == 3 * 64 * 576
    assert padding["model.layers.0.self_attn.k_proj.weight"].numel() == 64 * 576
    assert padding["model.layers.0.self_attn.o_proj.weight"].numel() == 576 * 3 * 64
    assert all(not p.any() for p in padding.values())
