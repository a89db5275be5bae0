"""FlopsCounter against a count of the real model's matmul weights and the 6·N·T + attention formula."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.support.models import tiny_model_path
from verl.utils.flops_counter import FlopsCounter, compute_mfu, get_device_peak_tflops


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_step_flops_match_hand_count(arch):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_path(arch))
    model = AutoModelForCausalLM.from_config(config)
    # every Linear weight takes part in a matmul (tied lm_head included: its matmul still runs)
    linear_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    seqlens = [5, 12, 7]
    head_dim = config.hidden_size // config.num_attention_heads
    attention = 12 * (25 + 144 + 49) * head_dim * config.num_attention_heads * config.num_hidden_layers
    expected = 6 * linear_params * 24 + attention
    counter = FlopsCounter(config, device_name="cpu")
    assert counter.step_flops(seqlens) == expected
    achieved, peak = counter.estimate_flops(seqlens, delta_time=2.0)
    assert achieved == pytest.approx(expected / 2.0 / 1e12)
    assert peak is None and compute_mfu(achieved, peak, world_size=2) == 0.0


def test_output_layer_on_some_positions():
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_path("llama"))
    counter = FlopsCounter(config, device_name="cpu")
    head = config.vocab_size * config.hidden_size
    seqlens = [5, 12, 7]
    # 24 tokens through the layers, 9 through the output layer: 15 head rows fewer, forward + backward
    assert counter.step_flops(seqlens, head_tokens=9) == counter.step_flops(seqlens) - 6 * head * 15
    assert counter.step_flops(seqlens, backward=False, head_tokens=9) == pytest.approx(
        (counter.step_flops(seqlens) - 6 * head * 15) / 3
    )


def test_peak_table_and_unknown_devices():
    assert get_device_peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert get_device_peak_tflops("NVIDIA H200") == 989.0
    assert get_device_peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert get_device_peak_tflops("cpu") is None
    assert compute_mfu(494.5, 989.0, world_size=1) == pytest.approx(0.5)
    if not torch.cuda.is_available():
        assert get_device_peak_tflops() is None


def test_unsupported_architecture_is_rejected():
    from transformers import AutoConfig

    with pytest.raises(ValueError, match="model_type"):
        FlopsCounter(AutoConfig.for_model("gpt2"))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_forward_only_and_value_head_hand_counts(arch):
    """A forward pass is 2·N·T + 4·Σs²·d·h·L; a critic's output layer is hidden x 1, not the vocabulary."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(tiny_model_path(arch))
    model = AutoModelForCausalLM.from_config(config)
    body = sum(m.weight.numel() for name, m in model.named_modules() if isinstance(m, nn.Linear) and name != "lm_head")
    seqlens = [3, 10]
    head_dim = config.hidden_size // config.num_attention_heads
    attention_fwd = 4 * (9 + 100) * head_dim * config.num_attention_heads * config.num_hidden_layers
    lm_head = config.vocab_size * config.hidden_size
    assert FlopsCounter(config, "cpu").step_flops(seqlens, backward=False) == 2 * (body + lm_head) * 13 + attention_fwd
    critic = FlopsCounter(config, "cpu", output_size=1)
    assert critic.step_flops(seqlens) == 6 * (body + config.hidden_size) * 13 + 3 * attention_fwd


def test_phase_mfu_uses_the_whole_batch_over_all_ranks():
    from types import SimpleNamespace

    from transformers import AutoConfig

    from verl.protocol import DataProto
    from verl.workers.actor.role_utils import phase_mfu

    counter = FlopsCounter(AutoConfig.from_pretrained(tiny_model_path("llama")), device_name="NVIDIA H100")
    # 4 ranks: 2 data-parallel groups of 2 sequence-parallel peers
    engine = SimpleNamespace(world_size=4, dp_size=2)
    data = DataProto.from_dict(tensors={"attention_mask": torch.ones(2, 4)}, meta_info={"global_token_num": [4, 4, 6]})
    expected = counter.step_flops([4, 4, 6], backward=False) / 0.5 / 1e12 / (989.0 * 4)
    assert phase_mfu(counter, data, 0.5, engine, backward=False) == pytest.approx(expected)
    data.meta_info.pop("global_token_num")  # only this rank's rows known: its share on its sequence-parallel group
    expected = counter.step_flops([4, 4]) * 3 / 0.5 / 1e12 / (989.0 * 2)
    assert phase_mfu(counter, data, 0.5, engine, backward=True, passes=3) == pytest.approx(expected)
    assert phase_mfu(None, data, 0.5, engine, backward=True) is None
    # the output layer on 3 of this rank's 8 tokens: on 3/8 of the whole batch's 14 as well
    data.meta_info["global_token_num"] = [4, 4, 6]
    expected = counter.step_flops([4, 4, 6], backward=False, head_tokens=14 * 3 / 8) / 0.5 / 1e12 / (989.0 * 4)
    assert phase_mfu(counter, data, 0.5, engine, backward=False, head_tokens=3) == pytest.approx(expected)
