"""The policy-side roles on the Megatron engine: the trained actor and the frozen reference policy.

Same interface as :mod:`verl.workers.actor.roles` (the FSDP roles), so the worker composing them is the only
place that knows which engine runs. Batch sizes are per **data-parallel** rank: ``world / (tp * pp)`` ranks.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from verl.protocol import DataProto
from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
from verl.utils.flops_counter import DENSE_MODEL_TYPES, FlopsCounter, compute_mfu
from verl.workers.actor.loss import step_overrides
from verl.workers.actor.megatron_actor import MegatronPPOActor
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    max_memory_allocated_gb,
    per_rank_mini_batch_size,
    with_fields,
)
from verl.workers.engine.megatron.engine import MegatronEngine


class MegatronActorRole(CheckpointedRole):
    """The trained policy: Megatron engine + ``MegatronPPOActor`` + checkpoints + MFU accounting."""

    optimizer_on_device_to_save = True

    def __init__(self, model_config, actor_config, tokenizer, rollout_n: int = 1):
        self.engine = MegatronEngine(model_config, actor_config.megatron, actor_config.optim, role="actor").initialize()
        mini = per_rank_mini_batch_size(actor_config, rollout_n, self.engine.dp_size, "actor_rollout_ref.actor")
        self.config = with_fields(actor_config, ppo_mini_batch_size=mini)
        self.actor = MegatronPPOActor(self.config, self.engine)
        self.checkpoint_manager = MegatronCheckpointManager(self.engine, tokenizer, actor_config.checkpoint)
        hf_config = self.engine.hf_config()
        self.flops_counter = FlopsCounter(hf_config) if hf_config.model_type in DENSE_MODEL_TYPES else None

    def compute_log_prob(self, data: DataProto, meta: dict, calculate_entropy: bool = True):
        data.meta_info.update(meta)
        return self.actor.compute_log_prob(data, calculate_entropy=calculate_entropy)

    def update(self, data: DataProto) -> dict:
        """One ``update_policy`` call plus ``actor/lr``, ``perf/mfu/actor``, ``perf/max_memory_allocated_gb``;
        advances the LR schedule by one step. MFU counts the whole batch's FLOPs over every rank of the group."""
        start = time.perf_counter()
        with step_overrides(self.actor, data.meta_info):
            metrics = self.actor.update_policy(data)
        elapsed = time.perf_counter() - start
        if self.flops_counter is not None:
            seqlens = data.meta_info.get("global_token_num")
            world = dist.get_world_size()
            if seqlens is None:  # only this data-parallel rank's share is known
                seqlens = data.batch["attention_mask"].sum(-1).tolist()
                world = world // self.engine.dp_size
            achieved, peak = self.flops_counter.estimate_flops(seqlens, elapsed)
            metrics["perf/mfu/actor"] = compute_mfu(achieved * int(self.config.ppo_epochs), peak, world)
        metrics["perf/max_memory_allocated_gb"] = max_memory_allocated_gb()
        metrics["actor/lr"] = self.engine.lr_scheduler_step()
        return metrics


class MegatronReferenceRole:
    """The frozen reference policy: its own Megatron engine (no optimizer, weights in the compute dtype)."""

    def __init__(self, model_config, ref_config):
        self.engine = MegatronEngine(model_config, ref_config.megatron, None, role="ref").initialize()
        self.config = ref_config
        self.actor = MegatronPPOActor(ref_config, self.engine)

    def compute_ref_log_prob(self, data: DataProto, meta: dict) -> torch.Tensor:
        data.meta_info.update(meta)
        log_probs, _ = self.actor.compute_log_prob(data, calculate_entropy=False)
        return log_probs
