"""The policy-side roles on one gloo rank: ``ActorRole`` with LoRA adapters and the ``LoraReferenceRole`` that
reads the actor's base model through them.

After an update the adapters move the actor's log-probs away from the base model's, while the reference role's
log-probs stay those of the untouched base model: a plain float32 HF forward of the model on disk, sequence by
sequence without padding, is the independent reference.
"""

from __future__ import annotations

import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import reference_log_probs, run_on_ranks, update_batch

META = {"micro_batch_size": 2, "use_dynamic_bsz": False, "max_token_len": None, "temperature": 1.0}


def _lora_actor_and_reference(rank: int, world: int, path: str) -> dict:
    from transformers import AutoTokenizer

    from verl.protocol import DataProto
    from verl.workers.actor.roles import ActorRole, LoraReferenceRole
    from verl.workers.config import FSDPActorConfig, HFModelConfig, OptimConfig, RefConfig

    model_config = HFModelConfig(
        path=path, use_remove_padding=True, lora_rank=4, lora_alpha=16, enable_gradient_checkpointing=False
    )
    actor_config = FSDPActorConfig(ppo_mini_batch_size=8, ppo_micro_batch_size_per_gpu=2, optim=OptimConfig(lr=5e-2))
    actor = ActorRole(model_config, actor_config, AutoTokenizer.from_pretrained(path))
    ref = LoraReferenceRole(actor, RefConfig())
    batch = update_batch(seed=0)
    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0})

    ref_before = ref.compute_ref_log_prob(data, dict(META))
    metrics = actor.update(data)
    ref_after = ref.compute_ref_log_prob(data, dict(META))
    actor_after, _ = actor.compute_log_prob(data, dict(META))
    return {
        "batch": batch,
        "ref_before": ref_before,
        "ref_after": ref_after,
        "actor_after": actor_after,
        "ref_metrics": dict(ref.last_metrics),
        "actor_infer_metrics": dict(actor.last_metrics),
        "update_metrics": metrics,
    }


def test_lora_reference_is_the_base_model_while_the_adapters_train():
    path = tiny_model_path("qwen2")
    (out,) = run_on_ranks(_lora_actor_and_reference, 1, path)
    from transformers import AutoModelForCausalLM

    batch = out["batch"]
    mask = batch["response_mask"].bool()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        expected = reference_log_probs(model, batch)

    torch.testing.assert_close(out["ref_before"][mask], expected[mask], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out["ref_after"][mask], expected[mask], atol=1e-4, rtol=1e-4)
    assert (out["actor_after"][mask] - expected[mask]).abs().max() > 1e-3  # the adapters moved the policy
    assert out["update_metrics"]["actor/grad_norm"][0] > 0
    for name in ("actor/lr", "perf/mfu/actor", "perf/max_memory_allocated_gb"):
        assert name in out["update_metrics"], name
    assert set(out["ref_metrics"]) == {"perf/mfu/ref"}  # 0.0 here: no known peak on a CPU
    assert set(out["actor_infer_metrics"]) == {"perf/mfu/actor_infer"}
