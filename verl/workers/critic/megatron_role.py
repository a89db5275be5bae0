"""The critic role on the Megatron engine: value model + ``MegatronPPOCritic`` + checkpoints (usable alone)."""

from __future__ import annotations

import time

import torch.distributed as dist

from verl.protocol import DataProto
from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    make_flops_counter,
    max_memory_allocated_gb,
    per_rank_mini_batch_size,
    with_fields,
)
from verl.workers.critic.megatron_critic import MegatronPPOCritic
from verl.workers.engine.megatron.engine import MegatronEngine


class MegatronCriticRole(CheckpointedRole):
    optimizer_on_device_to_save = True

    def __init__(self, critic_config, tokenizer):
        self.engine = MegatronEngine(
            critic_config.model, critic_config.megatron, critic_config.optim, role="critic"
        ).initialize()
        rollout_n = critic_config.rollout_n
        mini = per_rank_mini_batch_size(critic_config, rollout_n, self.engine.dp_size, "critic")
        self.config = with_fields(critic_config, ppo_mini_batch_size=mini)
        self.critic = MegatronPPOCritic(self.config, self.engine)
        self.checkpoint_manager = MegatronCheckpointManager(
            self.engine, tokenizer, critic_config.checkpoint, role="critic"
        )
        # the value head is hidden x 1, not the vocabulary projection
        self.flops_counter = make_flops_counter(self.engine.hf_config(), output_size=1)
        self.last_metrics: dict = {}

    def forward_meta(self) -> dict:
        config = self.config
        return {
            "micro_batch_size": config.forward_micro_batch_size_per_gpu or config.ppo_micro_batch_size_per_gpu,
            "use_dynamic_bsz": bool(config.use_dynamic_bsz),
            "max_token_len": config.forward_max_token_len_per_gpu or config.ppo_max_token_len_per_gpu,
        }

    def _mfu(self, data: DataProto, elapsed: float, backward: bool, passes: int = 1) -> float | None:
        """MFU of ``passes`` passes over the whole batch (``meta_info['global_token_num']``) on every rank of the
        group, or over this data-parallel rank's rows on its model-parallel ranks; None without a counter."""
        if self.flops_counter is None:
            return None
        seqlens, world = data.meta_info.get("global_token_num"), dist.get_world_size()
        if seqlens is None:
            seqlens, world = data.batch["attention_mask"].sum(-1).tolist(), world // self.engine.dp_size
        return passes * self.flops_counter.mfu(seqlens, elapsed, world, backward=backward)

    def compute_values(self, data: DataProto):
        """Values ``(bs, R)``; ``self.last_metrics`` gets ``perf/mfu/critic_infer``."""
        data.meta_info.update(self.forward_meta())
        start = time.perf_counter()
        values = self.critic.compute_values(data)
        mfu = self._mfu(data, time.perf_counter() - start, backward=False)
        self.last_metrics = {} if mfu is None else {"perf/mfu/critic_infer": mfu}
        return values

    def update(self, data: DataProto) -> dict:
        """One ``update_critic`` call plus ``critic/lr``, ``perf/mfu/critic``, ``perf/max_memory_allocated_gb``."""
        start = time.perf_counter()
        metrics = self.critic.update_critic(data)
        mfu = self._mfu(data, time.perf_counter() - start, backward=True, passes=int(self.config.ppo_epochs))
        if mfu is not None:
            metrics["perf/mfu/critic"] = mfu
        metrics["perf/max_memory_allocated_gb"] = max_memory_allocated_gb()
        metrics["critic/lr"] = self.engine.lr_scheduler_step()
        return metrics
