"""The fused output head (``use_fused_kernels``) inside a real model forward: the log-probs, entropy and every
parameter gradient of the plain logits path, and a clear refusal for models whose logits it cannot reproduce."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch


@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # tied (llama) and separate (qwen2) output weights
def test_fused_head_matches_the_logits_path(arch):
    from transformers import AutoModelForCausalLM

    from verl.workers.engine.fsdp.forward import forward_log_probs

    batch = rollout_batch(batch_size=4, seed=3)
    weights = torch.randn(batch["input_ids"].shape, generator=torch.Generator().manual_seed(0))
    results = {}
    for fused in (False, True):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_path(arch), dtype=torch.float32)
        log_probs, entropy = forward_log_probs(
            model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["position_ids"],
            temperature=0.8,
            calculate_entropy=True,
            use_fused_kernels=fused,
        )
        ((log_probs + 0.1 * entropy) * weights).sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        results[fused] = (log_probs.detach(), entropy.detach(), grads)
    (lp, ent, grads), (fused_lp, fused_ent, fused_grads) = results[False], results[True]
    torch.testing.assert_close(fused_lp, lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fused_ent, ent, atol=1e-5, rtol=1e-5)
    assert fused_grads.keys() == grads.keys()
    for name, grad in grads.items():
        scale = float(grad.abs().max())
        torch.testing.assert_close(fused_grads[name], grad, atol=1e-5 * scale + 1e-8, rtol=0, msg=name)


def test_models_with_transformed_logits_are_refused():
    from transformers import AutoModelForCausalLM

    from verl.workers.engine.fsdp.head import check_fused_head_supported

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path("llama"), dtype=torch.float32)
    check_fused_head_supported(model)
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ValueError, match="use_fused_kernels=False"):
        check_fused_head_supported(model)
