"""The critic role on the Megatron engine: value model + ``MegatronPPOCritic`` + checkpoints (usable alone)."""

from __future__ import annotations

import time

from verl.protocol import DataProto
from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    make_flops_counter,
    max_memory_allocated_gb,
    per_rank_mini_batch_size,
    phase_mfu,
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

    def compute_values(self, data: DataProto):
        """Values ``(bs, R)``; ``self.last_metrics`` gets ``perf/mfu/critic_infer``."""
        data.meta_info.update(self.forward_meta())
        start = time.perf_counter()
        values = self.critic.compute_values(data)
        mfu = phase_mfu(self.flops_counter, data, time.perf_counter() - start, self.engine, backward=False)
        self.last_metrics = {} if mfu is None else {"perf/mfu/critic_infer": mfu}
        return values

    def update(self, data: DataProto) -> dict:
        """One ``update_critic`` call plus ``critic/lr``, ``perf/mfu/critic``, ``perf/max_memory_allocated_gb``."""
        start = time.perf_counter()
        metrics = self.critic.update_critic(data)
        elapsed = time.perf_counter() - start
        passes = int(self.config.ppo_epochs)
        mfu = phase_mfu(self.flops_counter, data, elapsed, self.engine, backward=True, passes=passes)
        if mfu is not None:
            metrics["perf/mfu/critic"] = mfu
        metrics["perf/max_memory_allocated_gb"] = max_memory_allocated_gb()
        metrics["critic/lr"] = self.engine.lr_scheduler_step()
        return metrics
