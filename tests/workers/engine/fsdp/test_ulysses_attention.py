"""The Ulysses attention wrapper outside a sequence-parallel pass (one process): it leaves the model's padded
attention and generation unchanged, builds the packed block-diagonal mask of a hand-worked example, refuses
implementations it cannot wrap, and the engine's head check names the key."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch
from verl.workers.engine.fsdp.ulysses_attention import (
    _packed_causal_mask,
    check_hf_config_heads,
    register_ulysses_attention,
    use_ulysses_attention,
)


def test_packed_causal_mask_hand_example():
    # three sequences: [0, 1, 2], [0, 1], [0]
    mask = _packed_causal_mask(torch.tensor([[0, 1, 2, 0, 1, 0]]))
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [0, 0, 0, 1, 0, 0],
            [0, 0, 0, 1, 1, 0],
            [0, 0, 0, 0, 0, 1],
        ],
        dtype=torch.bool,
    )
    assert mask.shape == (1, 1, 6, 6)
    assert torch.equal(mask[0, 0], expected)


def test_wrapped_model_without_sequence_parallel_is_unchanged():
    path = tiny_model_path("llama")
    plain = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    wrapped = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    assert use_ulysses_attention(wrapped) == "ulysses_sdpa"
    batch = rollout_batch(batch_size=4, seed=2)  # left-padded prompts: the padding mask matters
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}
    with torch.no_grad():
        torch.testing.assert_close(wrapped(**inputs).logits, plain(**inputs).logits, rtol=0, atol=0)
    prompts = {"input_ids": batch["prompts"], "attention_mask": batch["attention_mask"][:, : batch["prompts"].shape[1]]}
    generated = [
        model.generate(**prompts, max_new_tokens=4, do_sample=False, pad_token_id=0) for model in (wrapped, plain)
    ]
    assert torch.equal(generated[0], generated[1])


@pytest.mark.parametrize("name", ["eager", "no_such_attention"])
def test_refuses_what_it_cannot_wrap(name):
    with pytest.raises(ValueError, match="cannot wrap attention implementation") as info:
        register_ulysses_attention(name)
    assert "sdpa" in str(info.value)


def test_head_check_names_the_key():
    config = AutoConfig.for_model("llama", num_attention_heads=9, num_key_value_heads=3, hidden_size=72)
    with pytest.raises(ValueError, match=r"critic.ulysses_sequence_parallel_size=2 must divide the model's 9"):
        check_hf_config_heads(config, 2, key="critic.ulysses_sequence_parallel_size")
    check_hf_config_heads(config, 3)  # 9 / 3 query heads, 3 / 3 KV heads


def test_sliding_window_layers_are_refused_with_sdpa():
    config = AutoConfig.for_model(
        "qwen2", num_attention_heads=4, num_key_value_heads=2, hidden_size=64, num_hidden_layers=2, vocab_size=128,
        use_sliding_window=True, sliding_window=8, max_window_layers=0,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    assert "sliding_attention" in model.config.layer_types
    with pytest.raises(ValueError, match="sliding-window attention layers"):
        use_ulysses_attention(model)
