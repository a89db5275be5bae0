"""Mixed precision as verl users configure it (``fsdp_config.mixed_precision``), on CPU with one gloo rank: the
forward really computes in ``param_dtype`` while master weights and gradients stay float32."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs, rollout_batch, run_on_ranks


def test_policy_follows_the_keys():
    from verl.workers.config.engine import MixedPrecisionConfig
    from verl.workers.engine.fsdp.sharding import mixed_precision_policy

    policy = mixed_precision_policy(MixedPrecisionConfig(param_dtype="bf16", on_cpu=True), "fp32")
    assert policy.param_dtype == torch.bfloat16 and policy.reduce_dtype == torch.float32
    assert mixed_precision_policy(MixedPrecisionConfig(param_dtype="fp32", on_cpu=True), "fp32") is None
    assert mixed_precision_policy(None, "fp32") is None
    if not torch.cuda.is_available():  # the default config casts on GPU only
        assert mixed_precision_policy(MixedPrecisionConfig(), "fp32") is None


def test_buffers_follow_buffer_dtype():
    from torch import nn

    from verl.workers.config.engine import MixedPrecisionConfig
    from verl.workers.engine.fsdp.sharding import cast_buffers

    module = nn.Module()
    module.register_buffer("freq", torch.ones(4, dtype=torch.bfloat16), persistent=False)
    module.register_buffer("index", torch.arange(4))
    cast_buffers(module, MixedPrecisionConfig(buffer_dtype="fp32"))
    assert module.freq.dtype == torch.float32 and module.index.dtype == torch.int64
    assert "freq" not in module.state_dict()  # still a non-persistent buffer


def _mixed_precision_rank(rank, world, path, batch):
    from verl.workers.config import FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.config.engine import MixedPrecisionConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine
    from verl.workers.engine.fsdp.forward import forward_log_probs

    engine_config = FSDPEngineConfig(mixed_precision=MixedPrecisionConfig(param_dtype="bf16", on_cpu=True))
    engine = FSDPEngine(
        HFModelConfig(path=path, enable_gradient_checkpointing=False), engine_config, OptimConfig(), role="actor"
    ).initialize()
    log_probs, _ = forward_log_probs(engine.module, batch["input_ids"], batch["attention_mask"], batch["position_ids"])
    (log_probs * batch["attention_mask"]).sum().backward()
    params = list(engine.module.parameters())
    return {
        "log_probs": log_probs.detach(),
        "param_dtypes": {p.dtype for p in params},
        "grad_dtypes": {p.grad.dtype for p in params},
    }


def test_bf16_compute_with_float32_master_weights_on_cpu():
    from transformers import AutoModelForCausalLM

    path = tiny_model_path("llama")
    batch = rollout_batch(batch_size=4, seed=7)
    (result,) = run_on_ranks(_mixed_precision_rank, 1, path, batch)
    assert result["param_dtypes"] == {torch.float32} and result["grad_dtypes"] == {torch.float32}
    response_length = batch["responses"].shape[1]
    mask = batch["response_mask"].bool()
    log_probs = result["log_probs"][:, -response_length - 1 : -1][mask]
    with torch.no_grad():
        fp32 = reference_log_probs(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), batch)[mask]
        bf16 = reference_log_probs(AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16), batch)[mask]
    assert (log_probs - fp32).abs().max() > 1e-4  # the cast acts: not the float32 forward
    assert (log_probs - bf16).abs().mean() < (bf16 - fp32).abs().mean()  # it is the bf16 forward


@pytest.mark.skipif(torch.cuda.is_available(), reason="the warning is about compute on the CPU")
def test_bf16_on_a_cpu_that_emulates_it_warns_once_naming_the_key(monkeypatch, caplog):
    from verl.workers.config.engine import MixedPrecisionConfig
    from verl.workers.engine.fsdp import sharding

    sharding.warn_emulated_bf16.cache_clear()
    monkeypatch.setattr(sharding, "cpu_multiplies_bf16", lambda: True)
    with caplog.at_level("WARNING", logger=sharding.__name__):
        sharding.mixed_precision_policy(MixedPrecisionConfig(param_dtype="bf16", on_cpu=True), "fp32")
    assert not caplog.records  # a CPU with native bf16: nothing to say
    monkeypatch.setattr(sharding, "cpu_multiplies_bf16", lambda: False)
    with caplog.at_level("WARNING", logger=sharding.__name__):
        sharding.mixed_precision_policy(MixedPrecisionConfig(param_dtype="fp32", on_cpu=True), "fp32")
        sharding.mixed_precision_policy(MixedPrecisionConfig(param_dtype="bf16", on_cpu=False), "fp32")
        assert not caplog.records  # fp32 compute, or the policy not applied on CPU
        for _ in range(2):
            sharding.mixed_precision_policy(MixedPrecisionConfig(param_dtype="bf16", on_cpu=True), "fp32")
    assert len(caplog.records) == 1  # once a process (the actor and the reference both build a policy)
    assert "actor_rollout_ref.actor.fsdp_config.mixed_precision.on_cpu=False" in caplog.text
    sharding.warn_emulated_bf16.cache_clear()
