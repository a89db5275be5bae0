"""The policy-side roles a worker composes: the trained actor and the frozen reference policy.

Each role owns its engine and is usable alone; ``ActorRolloutRefWorker`` only holds them together.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import torch

from verl.protocol import DataProto
from verl.utils.checkpoint import FSDPCheckpointManager
from verl.workers.actor.dp_actor import DataParallelPPOActor
from verl.workers.actor.loss import step_overrides
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    make_flops_counter,
    per_rank_mini_batch_size,
    phase_mfu,
    update_with_metrics,
    with_fields,
)
from verl.workers.engine.registry import get_engine_cls


def log_prob_meta(config, temperature: float) -> dict:
    """``meta_info`` for ``compute_log_prob`` from a config with verl's ``log_prob_*`` keys."""
    return {
        "micro_batch_size": config.log_prob_micro_batch_size_per_gpu,
        "use_dynamic_bsz": bool(config.log_prob_use_dynamic_bsz),
        "max_token_len": config.log_prob_max_token_len_per_gpu,
        "temperature": temperature,
    }


class ActorRole(CheckpointedRole):
    """The trained policy: FSDP engine + ``DataParallelPPOActor`` + checkpoints + MFU accounting."""

    def __init__(self, model_config, actor_config, tokenizer, rollout_n: int = 1):
        self.engine = get_engine_cls(actor_config.strategy)(
            model_config,
            actor_config.fsdp_config,
            actor_config.optim,
            role="actor",
            use_torch_compile=actor_config.use_torch_compile,
            freeze_vision_tower=actor_config.freeze_vision_tower,
            ulysses_sequence_parallel_size=actor_config.ulysses_sequence_parallel_size,
        ).initialize()
        mini = per_rank_mini_batch_size(actor_config, rollout_n, self.engine.dp_size, "actor_rollout_ref.actor")
        self.config = with_fields(actor_config, ppo_mini_batch_size=mini)
        self.actor = DataParallelPPOActor(
            self.config,
            self.engine.forward_module,
            self.engine.optimizer,
            use_remove_padding=bool(model_config.use_remove_padding),
            ulysses=self.engine.ulysses,
            use_fused_kernels=bool(model_config.use_fused_kernels),
            use_torch_compile=self.engine.use_torch_compile,
        )
        self.checkpoint_manager = FSDPCheckpointManager(
            self.engine.module, self.engine.optimizer, self.engine.lr_scheduler, tokenizer, actor_config.checkpoint
        )
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}
        self.engine.offload_optimizer()

    @property
    def module(self):
        return self.engine.module

    def compute_log_prob(self, data: DataProto, meta: dict, calculate_entropy: bool = True):
        """``(log_probs, entropys)``; ``self.last_metrics`` gets ``perf/mfu/actor_infer``."""
        data.meta_info.update(meta)
        start = time.perf_counter()
        out = self.actor.compute_log_prob(data, calculate_entropy=calculate_entropy)
        mfu = phase_mfu(self.flops_counter, data, time.perf_counter() - start, self.engine, backward=False)
        self.last_metrics = {} if mfu is None else {"perf/mfu/actor_infer": mfu}
        return out

    def update(self, data: DataProto) -> dict:
        """One ``update_policy`` call plus ``actor/lr``, ``perf/mfu/actor``, ``perf/max_memory_allocated_gb``;
        advances the LR schedule by one step."""

        def update_policy() -> dict:
            with step_overrides(self.actor, data.meta_info):
                return self.actor.update_policy(data)

        epochs = int(self.config.ppo_epochs)
        return update_with_metrics("actor", self.engine, self.flops_counter, data, epochs, update_policy)


class ReferenceRole:
    """The frozen reference policy: its own FSDP engine (no optimizer) and log-prob computation."""

    def __init__(self, model_config, ref_config):
        self.engine = get_engine_cls(ref_config.strategy)(
            with_fields(model_config, lora_rank=0),
            ref_config.fsdp_config,
            None,
            role="ref",
            use_torch_compile=ref_config.use_torch_compile,
            ulysses_sequence_parallel_size=ref_config.ulysses_sequence_parallel_size,
        ).initialize()
        self.config = ref_config
        self.actor = DataParallelPPOActor(
            ref_config,
            self.engine.forward_module,
            None,
            use_remove_padding=bool(model_config.use_remove_padding),
            ulysses=self.engine.ulysses,
            use_fused_kernels=bool(model_config.use_fused_kernels),
            use_torch_compile=self.engine.use_torch_compile,
        )
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}

    def compute_ref_log_prob(self, data: DataProto, meta: dict) -> torch.Tensor:
        """Reference log-probs ``(bs, R)``; ``self.last_metrics`` gets ``perf/mfu/ref``."""
        data.meta_info.update(meta)
        start = time.perf_counter()
        log_probs, _ = self.actor.compute_log_prob(data, calculate_entropy=False)
        mfu = phase_mfu(self.flops_counter, data, time.perf_counter() - start, self.engine, backward=False)
        self.last_metrics = {} if mfu is None else {"perf/mfu/ref": mfu}
        return log_probs


class LoraReferenceRole:
    """With LoRA the reference is the actor's base model: the actor module with its adapters disabled
    (no second copy of the weights)."""

    def __init__(self, actor_role: ActorRole, ref_config):
        self.actor_role = actor_role
        self.config = ref_config
        self.last_metrics: dict = {}

    def compute_ref_log_prob(self, data: DataProto, meta: dict) -> torch.Tensor:
        module = self.actor_role.engine.module
        data.meta_info.update(meta)
        disable = getattr(module, "disable_adapter", None)
        start = time.perf_counter()
        with disable() if disable is not None else nullcontext():
            log_probs, _ = self.actor_role.actor.compute_log_prob(data, calculate_entropy=False)
        role = self.actor_role
        mfu = phase_mfu(role.flops_counter, data, time.perf_counter() - start, role.engine, backward=False)
        self.last_metrics = {} if mfu is None else {"perf/mfu/ref": mfu}
        return log_probs
