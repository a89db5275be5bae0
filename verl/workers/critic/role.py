"""The critic role: FSDP value model + ``DataParallelPPOCritic`` + checkpoints (usable alone)."""

from __future__ import annotations

from verl.protocol import DataProto
from verl.utils.checkpoint import FSDPCheckpointManager
from verl.workers.actor.role_utils import (
    CheckpointedRole,
    forward_with_metrics,
    make_flops_counter,
    per_rank_mini_batch_size,
    update_with_metrics,
    with_fields,
)
from verl.workers.critic.dp_critic import DataParallelPPOCritic
from verl.workers.engine.registry import get_engine_cls


class CriticRoleBase(CheckpointedRole):
    """What the critic role does on any engine. A subclass's ``__init__`` sets ``engine``, ``config`` (the critic
    config with the per-rank mini-batch), ``critic`` (its ``compute_values`` / ``update_critic``),
    ``checkpoint_manager``, ``flops_counter`` and ``last_metrics = {}``."""

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
        values, self.last_metrics = forward_with_metrics(
            "perf/mfu/critic_infer", self.engine, self.flops_counter, data, lambda: self.critic.compute_values(data)
        )
        return values

    def update(self, data: DataProto) -> dict:
        """One ``update_critic`` call plus ``critic/lr``, ``perf/mfu/critic`` and ``perf/max_memory_allocated_gb``."""
        epochs = int(self.config.ppo_epochs)
        return update_with_metrics(
            "critic", self.engine, self.flops_counter, data, epochs, lambda: self.critic.update_critic(data)
        )


class CriticRole(CriticRoleBase):
    """The critic on the FSDP engine."""

    def __init__(self, critic_config, tokenizer):
        model_config = critic_config.model
        self.engine = get_engine_cls(critic_config.strategy)(
            model_config,
            model_config.fsdp_config,
            critic_config.optim,
            role="critic",
            ulysses_sequence_parallel_size=critic_config.ulysses_sequence_parallel_size,
        ).initialize()
        mini = per_rank_mini_batch_size(critic_config, critic_config.rollout_n, self.engine.dp_size, "critic")
        self.config = with_fields(critic_config, ppo_mini_batch_size=mini)
        self.critic = DataParallelPPOCritic(
            self.config,
            self.engine.forward_module,
            self.engine.optimizer,
            use_remove_padding=bool(model_config.use_remove_padding),
            ulysses=self.engine.ulysses,
        )
        self.checkpoint_manager = FSDPCheckpointManager(
            self.engine.module,
            self.engine.optimizer,
            self.engine.lr_scheduler,
            tokenizer,
            critic_config.checkpoint,
            role="critic",
        )
        # the value head is hidden x 1, not the vocabulary projection
        self.flops_counter = make_flops_counter(self.engine.hf_config(), output_size=1)
        self.last_metrics: dict = {}
        self.engine.offload_optimizer()
