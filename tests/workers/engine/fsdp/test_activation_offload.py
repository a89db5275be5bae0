"""Activation offload: which saved tensors move, that the hooks really see the model's saved tensors, and that
gradients are unchanged. On a GPU the saved activations leave device memory."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch


def test_parameters_and_small_tensors_stay():
    from verl.workers.engine.fsdp.activation_offload import ActivationOffload

    offload = ActivationOffload(nn.Identity(), min_bytes=1024)
    weight = nn.Parameter(torch.zeros(64, 64))
    assert not offload.should_offload(weight)
    assert not offload.should_offload(weight.t())  # linear saves the transposed weight, a view of the parameter
    assert not offload.should_offload(torch.zeros(8))
    assert offload.should_offload(torch.zeros(64, 64))


def _grads_and_offload(enable: bool, device: str):
    from transformers import AutoModelForCausalLM

    from verl.workers.engine.fsdp.activation_offload import ActivationOffload
    from verl.workers.engine.fsdp.forward import forward_log_probs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path("llama"), dtype=torch.float32).to(device)
    offload = ActivationOffload(model, min_bytes=0) if enable else None
    batch = {k: v.to(device) for k, v in rollout_batch(batch_size=4, seed=5).items()}
    log_probs, _ = forward_log_probs(model, batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    if device == "cuda":
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated()
    else:
        held = 0
    (log_probs * batch["attention_mask"]).sum().backward()
    return {n: p.grad.cpu() for n, p in model.named_parameters()}, offload, held


def test_hooks_see_the_saved_tensors_and_leave_gradients_unchanged():
    plain, _, _ = _grads_and_offload(False, "cpu")
    grads, offload, _ = _grads_and_offload(True, "cpu")
    assert offload.saved_count > 50  # every op of every layer saved through the hooks
    assert offload.offloaded_bytes == 0  # on the CPU the tensors are already in host memory
    for name, grad in plain.items():
        torch.testing.assert_close(grads[name], grad, atol=0, rtol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_saved_activations_leave_gpu_memory():
    plain, _, held_plain = _grads_and_offload(False, "cuda")
    grads, offload, held = _grads_and_offload(True, "cuda")
    assert offload.offloaded_bytes > 0 and held < held_plain
    for name, grad in plain.items():
        torch.testing.assert_close(grads[name], grad, atol=1e-6, rtol=1e-5)
