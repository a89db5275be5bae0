"""Helpers for driving the Megatron engine in spawned gloo (CPU) or NCCL (GPU) ranks."""

from __future__ import annotations

import torch

from tests.workers.actor.test_dp_actor import BATCH, CLIP, ENT, EPS, KL, LR, WD


def reset_parallel_state() -> None:
    """Forget megatron-core's process groups so the next engine may use another layout (tests only)."""
    from megatron.core import parallel_state

    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()


def megatron_actor(
    path: str,
    tp: int = 1,
    pp: int = 1,
    vpp: int | None = None,
    micro: int = 2,
    optim_overrides: dict | None = None,
    **engine_overrides,
):
    """A fresh Megatron engine + ``MegatronPPOActor`` with test_dp_actor's PPO settings."""
    from verl.workers.actor.megatron_actor import MegatronPPOActor
    from verl.workers.config import FSDPActorConfig, HFModelConfig, McoreEngineConfig, OptimConfig
    from verl.workers.engine.megatron.engine import MegatronEngine

    reset_parallel_state()
    optim = OptimConfig(lr=LR, weight_decay=WD, override_optimizer_config={"eps": EPS}, **(optim_overrides or {}))
    engine_config = McoreEngineConfig(
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vpp,
        sequence_parallel=bool(engine_overrides.pop("sequence_parallel", False)),
        **engine_overrides,
    )
    engine = MegatronEngine(
        HFModelConfig(path=path, enable_gradient_checkpointing=False), engine_config, optim, role="actor"
    ).initialize()
    config = FSDPActorConfig(
        ppo_mini_batch_size=BATCH // engine.dp_size,
        ppo_micro_batch_size_per_gpu=micro,
        ppo_max_token_len_per_gpu=24,
        clip_ratio=CLIP,
        entropy_coeff=ENT,
        use_kl_loss=True,
        kl_loss_coef=KL,
        kl_loss_type="low_var_kl",
        grad_clip=1.0,
        optim=optim,
    )
    return engine, MegatronPPOActor(config, engine)


def capture_clipped_grads(engine) -> dict[str, torch.Tensor]:
    """Fill the returned dict with ``{global megatron-core name: grad shard}`` right before each optimizer step."""
    from verl.workers.engine.megatron.weights import local_parameters

    captured: dict[str, torch.Tensor] = {}
    step = engine.optimizer.step

    def step_and_capture(*args, **kwargs):
        for name, param in local_parameters(engine.chunks).items():
            captured[name] = param.grad.detach().clone()
        return step(*args, **kwargs)

    engine.optimizer.step = step_and_capture
    return captured


def full_hf_tensors(engine, per_param: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Full Hugging Face-named tensors from per-parameter shards (e.g. gradients) on every rank (collective)."""
    from verl.models.mcore.weight_converter import is_value_model, to_hf
    from verl.workers.engine.megatron.weights import gather_full

    out = {}
    value_model = is_value_model(engine.hf_config())
    for name, spec in engine.weight_specs().items():
        full = gather_full(name, spec, per_param, engine.ranks, value_model)
        out.update(to_hf(name, full, engine.hf_config()))
    return out


def run_actor_variant(rank, world, path, batch, layout: dict):
    """Log-probs, one PPO update, the clipped grads and the updated params (full HF tensors) of one layout
    (``layout["dynamic"]``: micro-batches by a 24-token budget instead of ``micro`` rows)."""
    from verl.protocol import DataProto

    layout = dict(layout)
    dynamic = bool(layout.pop("dynamic", False))
    engine, actor = megatron_actor(path, **layout)
    data = DataProto.from_dict(tensors=batch, meta_info={"temperature": 1.0}).chunk(engine.dp_size)[engine.dp_rank]
    micro = layout.get("micro", 2)
    data.meta_info.update(micro_batch_size=micro, use_dynamic_bsz=dynamic, max_token_len=24)
    actor.config.use_dynamic_bsz = dynamic
    log_probs, entropys = actor.compute_log_prob(data, calculate_entropy=True)
    grads = capture_clipped_grads(engine)
    metrics = actor.update_policy(data)
    full_grads = full_hf_tensors(engine, grads)
    params = dict(engine.iter_full_state_dict())
    out = {"log_probs": log_probs, "entropys": entropys, "metrics": metrics, "dp_rank": engine.dp_rank}
    out["collect"] = engine.is_collect_rank
    return {**out, "params": params, "grads": full_grads} if rank == 0 else out
