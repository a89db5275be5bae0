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
