"""fsdp_config.wrap_policy (per-layer units or the root alone) / forward_prefetch / offload_policy,
model.enable_activation_offload and the actor's entropy_from_logits_with_chunking / entropy_checkpointing /
calculate_sum_pi_squared change how the work is done, not its result: compared with the plain engine and with a
direct softmax of the unsharded model's logits."""

from __future__ import annotations

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rollout_batch, run_on_ranks


def test_sharding_units_follow_the_wrap_policy():
    from transformers import AutoModelForCausalLM

    from verl.workers.config import WrapPolicyConfig
    from verl.workers.engine.fsdp.sharding import sharding_units

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    layers = list(model.model.layers)
    assert sharding_units(model, WrapPolicyConfig()) == layers
    by_name = sharding_units(model, WrapPolicyConfig(transformer_layer_cls_to_wrap=["LlamaDecoderLayer"]))
    assert by_name == layers
    norm_params = model.model.norm.weight.numel()
    units = sharding_units(model, WrapPolicyConfig(min_num_params=norm_params))
    assert model.model.norm in units and all(layer in units for layer in layers)
    tied = model.model.embed_tokens.weight is model.lm_head.weight
    assert (model.model.embed_tokens in units) is not tied  # a tied embedding stays with the root
    assert sharding_units(model, WrapPolicyConfig(transformer_layer_cls_to_wrap=[])) == []  # the root alone
    with_norm = sharding_units(model, WrapPolicyConfig(transformer_layer_cls_to_wrap=[], min_num_params=norm_params))
    assert model.model.norm in with_norm and not any(layer in with_norm for layer in layers)
    with pytest.raises(ValueError, match="transformer_layer_cls_to_wrap"):
        sharding_units(model, WrapPolicyConfig(transformer_layer_cls_to_wrap=["NoSuchLayer"]))


def _grads(engine, batch):
    from verl.workers.engine.fsdp.forward import forward_log_probs

    engine.zero_grad()
    log_probs, _ = forward_log_probs(
        engine.module, batch["input_ids"], batch["attention_mask"], batch["position_ids"], use_remove_padding=True
    )
    loss = -(log_probs * batch["attention_mask"]).sum() / batch["attention_mask"].sum()
    loss.backward()
    return float(loss), {n: p.grad.full_tensor().clone() for n, p in engine.module.named_parameters()}


def _options_rank(rank, world, model_path):
    from torch.distributed.fsdp import FSDPModule

    from verl.protocol import DataProto
    from verl.workers.actor.dp_actor import DataParallelPPOActor
    from verl.workers.config import ActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig, WrapPolicyConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    batch = rollout_batch(batch_size=4)
    plain = FSDPEngine(
        HFModelConfig(path=model_path, enable_gradient_checkpointing=False),
        FSDPEngineConfig(),
        OptimConfig(),
        role="actor",
    ).initialize()
    options = FSDPEngineConfig(
        wrap_policy=WrapPolicyConfig(min_num_params=32), forward_prefetch=True, offload_policy=True
    )
    offloaded = HFModelConfig(path=model_path, enable_activation_offload=True, enable_gradient_checkpointing=False)
    tuned = FSDPEngine(offloaded, options, OptimConfig(), role="actor").initialize()
    root_only = FSDPEngineConfig(wrap_policy=WrapPolicyConfig(transformer_layer_cls_to_wrap=[]))
    root = FSDPEngine(HFModelConfig(path=model_path, enable_gradient_checkpointing=False), root_only, OptimConfig(),
                      role="actor").initialize()  # fmt: skip
    out = {"plain": _grads(plain, batch), "tuned": _grads(tuned, batch), "root": _grads(root, batch)}
    out["root_units"] = [isinstance(m, FSDPModule) for m in (root.module, *root.module.model.layers)]
    out["prefetch"] = len(tuned.module.model.layers[0]._get_fsdp_state()._states_to_forward_prefetch)

    data = DataProto.from_dict(
        tensors={k: batch[k] for k in ("input_ids", "attention_mask", "position_ids", "responses")},
        meta_info={"micro_batch_size": 2, "temperature": 0.7},
    )
    results = {}
    for name, config in {
        "plain": ActorConfig(),
        "chunked": ActorConfig(entropy_from_logits_with_chunking=True, entropy_checkpointing=True),
    }.items():
        actor = DataParallelPPOActor(config, plain.module, None, use_remove_padding=True)
        results[name] = actor.compute_log_prob(data, calculate_entropy=True)
    out["entropy"] = results
    out["sum_pi_squared"] = DataParallelPPOActor(ActorConfig(), plain.module, None).compute_sum_pi_squared(data)
    # rollout.layered_summon syncs with bucket_bytes=0: one tensor per bucket, the same tensors
    layered = dict(plain.iter_full_state_dict(bucket_bytes=0))
    bucketed = dict(plain.iter_full_state_dict())
    out["layered_same"] = layered.keys() == bucketed.keys() and all(
        torch.equal(layered[k], bucketed[k]) for k in layered
    )
    out["batch"] = batch
    return out


def test_engine_and_actor_options_keep_the_numbers():
    from transformers import AutoModelForCausalLM

    model_path = tiny_model_path()
    (out,) = run_on_ranks(_options_rank, 1, model_path)
    plain_loss, plain_grads = out["plain"]
    tuned_loss, tuned_grads = out["tuned"]
    assert tuned_loss == pytest.approx(plain_loss, rel=1e-6)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(tuned_grads[name], grad, rtol=1e-5, atol=1e-7)
    root_loss, root_grads = out["root"]
    assert out["root_units"] == [True] + [False] * (len(out["root_units"]) - 1)  # one unit: the root
    assert root_loss == plain_loss  # the same arithmetic, one gather instead of one per layer
    for name, grad in plain_grads.items():
        torch.testing.assert_close(root_grads[name], grad, rtol=0, atol=0)
    assert out["prefetch"] == 1  # the first unit prefetches the next one
    assert out["layered_same"]

    (log_probs, entropy), (log_probs_c, entropy_c) = out["entropy"]["plain"], out["entropy"]["chunked"]
    torch.testing.assert_close(log_probs_c, log_probs)
    torch.testing.assert_close(entropy_c, entropy, rtol=1e-5, atol=1e-6)

    # reference: softmax of the unsharded model's tempered logits at the positions before each response token
    batch = out["batch"]
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    with torch.no_grad():
        logits = (
            model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
            ).logits
            / 0.7
        )
    response_length = batch["responses"].shape[1]
    probs = torch.softmax(logits[:, -response_length - 1 : -1].double(), dim=-1)
    expected = (probs**2).sum(-1) * batch["attention_mask"][:, -response_length:]
    torch.testing.assert_close(out["sum_pi_squared"].double(), expected, rtol=1e-4, atol=1e-6)
