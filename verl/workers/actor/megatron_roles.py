"""The policy-side roles on the Megatron engine: the trained actor and the frozen reference policy.

Same interface as :mod:`verl.workers.actor.roles` (the FSDP roles), so the worker composing them is the only
place that knows which engine runs. Batch sizes are per **data-parallel** rank: ``world / (tp * pp)`` ranks.
"""

from __future__ import annotations

import time

import torch

from verl.protocol import DataProto
from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
from verl.workers.actor.loss import step_overrides
from verl.workers.actor.megatron_actor import MegatronPPOActor
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    make_flops_counter,
    max_memory_allocated_gb,
    per_rank_mini_batch_size,
    phase_mfu,
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
        self.flops_counter = make_flops_counter(self.engine.hf_config())
        self.last_metrics: dict = {}

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
        advances the LR schedule by one step. MFU counts the whole batch's FLOPs over every rank of the group."""
        start = time.perf_counter()
        with step_overrides(self.actor, data.meta_info):
            metrics = self.actor.update_policy(data)
        elapsed = time.perf_counter() - start
        passes = int(self.config.ppo_epochs)
        mfu = phase_mfu(self.flops_counter, data, elapsed, self.engine, backward=True, passes=passes)
        if mfu is not None:
            metrics["perf/mfu/actor"] = mfu
        metrics["perf/max_memory_allocated_gb"] = max_memory_allocated_gb()
        metrics["actor/lr"] = self.engine.lr_scheduler_step()
        return metrics


class MegatronReferenceRole:
    """The frozen reference policy: its own Megatron engine (no optimizer, weights in the compute dtype)."""

    def __init__(self, model_config, ref_config):
        self.engine = MegatronEngine(model_config, ref_config.megatron, None, role="ref").initialize()
        self.config = ref_config
        self.actor = MegatronPPOActor(ref_config, self.engine)
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
