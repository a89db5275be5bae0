"""The critic role on the Megatron engine: value model + ``MegatronPPOCritic`` + checkpoints (usable alone)."""

from __future__ import annotations

from verl.utils.checkpoint.megatron_checkpoint_manager import MegatronCheckpointManager
from verl.workers.actor.role_utils import make_flops_counter, per_rank_mini_batch_size, with_fields
from verl.workers.critic.megatron_critic import MegatronPPOCritic
from verl.workers.critic.role import CriticRoleBase
from verl.workers.engine.megatron.engine import MegatronEngine


class MegatronCriticRole(CriticRoleBase):
    """The critic on the Megatron engine."""

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
