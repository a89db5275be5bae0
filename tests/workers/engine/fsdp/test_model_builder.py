"""What ``build_module`` switches on really acts: gradient checkpointing recomputes each decoder layer in the
backward pass; Liger kernels are refused on a machine without CUDA, naming the key."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch


def _layer_calls(enable_gradient_checkpointing: bool) -> tuple[int, int]:
    from verl.workers.config import HFModelConfig
    from verl.workers.engine.fsdp.forward import forward_log_probs
    from verl.workers.engine.fsdp.model_builder import build_module

    config = HFModelConfig(path=tiny_model_path("llama"), enable_gradient_checkpointing=enable_gradient_checkpointing)
    module = build_module(config, "actor", torch.float32)
    module.train()
    calls = []
    # a pre-hook: the recomputation stops (early) inside the MLP once every saved tensor is back, so a post-hook
    # of the MLP or the layer would not fire
    for layer in module.model.layers:
        layer.mlp.register_forward_pre_hook(lambda *_: calls.append(1))
    batch = rollout_batch(batch_size=4, seed=6)
    log_probs, _ = forward_log_probs(module, batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    forward_calls = len(calls)
    log_probs.sum().backward()
    return forward_calls, len(calls), len(module.model.layers)


def test_gradient_checkpointing_recomputes_each_layer_in_backward():
    forward_calls, total_calls, layers = _layer_calls(enable_gradient_checkpointing=True)
    assert forward_calls == layers and total_calls == 2 * layers
    forward_calls, total_calls, layers = _layer_calls(enable_gradient_checkpointing=False)
    assert forward_calls == total_calls == layers


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_liger_is_refused_without_cuda():
    from verl.workers.config import HFModelConfig
    from verl.workers.engine.fsdp.model_builder import build_module

    with pytest.raises(RuntimeError, match="use_liger=True needs a CUDA GPU"):
        build_module(HFModelConfig(path=tiny_model_path("llama"), use_liger=True), "actor", torch.float32)
