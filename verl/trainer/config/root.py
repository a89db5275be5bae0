"""The whole PPO config tree (``python -m verl.trainer.main_ppo``), one typed dataclass per group."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.trainer.config.algorithm import AlgoConfig
from verl.trainer.config.data import DataConfig
from verl.trainer.config.trainer import CustomRewardFunctionConfig, RayKwargsConfig, TrainerConfig
from verl.workers.config import (
    CriticConfig,
    FSDPActorConfig,
    HFModelConfig,
    RefConfig,
    RewardModelConfig,
    RolloutConfig,
)
from verl.workers.config.base import BaseConfig, bounded_field, choice_field
from verl.workers.config.optimizer import OptimConfig


def critic_defaults() -> CriticConfig:
    """verl's ``critic`` section: the PPO-updated role's fields (declared once, ``verl/workers/config/roles.py``)
    with the two values verl gives the critic of its own (``critic/critic.yaml``): twice the actor's token budget
    (the value model keeps no vocabulary-sized logits) and ten times its learning rate."""
    return CriticConfig(ppo_max_token_len_per_gpu=32768, optim=OptimConfig(lr=1e-5))


@dataclass
class ActorRolloutRefConfig(BaseConfig):
    """The policy model and its three roles, held by one worker group."""

    hybrid_engine: bool = choice_field(True, (True,))
    """Actor, rollout and reference share one worker group (the only layout of this build)."""

    nccl_timeout: int | None = bounded_field(None, gt=0)
    """Seconds a collective of this worker group may wait before ``torch.distributed`` gives up (verl's NCCL
    timeout; gloo on CPU); null uses ``$VERL_COLLECTIVE_TIMEOUT_S``, else 600."""

    model: HFModelConfig = field(default_factory=HFModelConfig)
    """The policy model, shared by the actor, the rollout and the reference."""

    actor: FSDPActorConfig = field(default_factory=FSDPActorConfig)
    """The policy's PPO update."""

    ref: RefConfig | None = field(default_factory=RefConfig)
    """The frozen reference policy, built when a KL term needs it; null removes it."""

    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """The generation engine."""


@dataclass
class PPOConfig(BaseConfig):
    """Root of ``verl/trainer/config/ppo_trainer.yaml``."""

    data: DataConfig = field(default_factory=DataConfig)
    """Datasets, lengths and batch sizes."""

    actor_rollout_ref: ActorRolloutRefConfig = field(default_factory=ActorRolloutRefConfig)
    """Policy model, actor, rollout and reference."""

    critic: CriticConfig = field(default_factory=critic_defaults)
    """Value model (used by estimators that need one, such as ``gae``); defaults: :func:`critic_defaults`."""

    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    """Reward manager."""

    custom_reward_function: CustomRewardFunctionConfig = field(default_factory=CustomRewardFunctionConfig)
    """User reward function."""

    algorithm: AlgoConfig = field(default_factory=AlgoConfig)
    """Advantage estimator and KL control."""

    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    """Run length, resources, checkpoints and logging."""

    ray_kwargs: RayKwargsConfig = field(default_factory=RayKwargsConfig)
    """Ray start-up options."""
