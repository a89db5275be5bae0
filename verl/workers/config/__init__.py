"""Typed configs of the worker roles (verl's ``verl.workers.config``)."""

from verl.workers.config.actor import ActorConfig, FSDPActorConfig, PolicyLossConfig
from verl.workers.config.base import BaseConfig
from verl.workers.config.critic import CriticConfig, CriticModelConfig, FSDPCriticConfig
from verl.workers.config.engine import FSDPEngineConfig
from verl.workers.config.megatron import McoreEngineConfig, MegatronEngineConfig
from verl.workers.config.model import DEFAULT_MODEL_PATH, HFModelConfig, resolve_model_path
from verl.workers.config.optimizer import OptimConfig
from verl.workers.config.ref import RefConfig
from verl.workers.config.reward_model import OverlongBufferConfig, RewardModelConfig
from verl.workers.config.roles import CheckpointConfig, EngineRoleConfig, ForwardConfig, LogProbConfig, PPOUpdateConfig
from verl.workers.config.rollout import AgentLoopConfig, MultiTurnConfig, RolloutConfig, SamplingConfig

FSDPOptimizerConfig = OptimConfig
"""verl's name of the FSDP optimizer config."""

__all__ = [
    "ActorConfig",
    "AgentLoopConfig",
    "BaseConfig",
    "CheckpointConfig",
    "CriticConfig",
    "CriticModelConfig",
    "DEFAULT_MODEL_PATH",
    "EngineRoleConfig",
    "FSDPActorConfig",
    "FSDPCriticConfig",
    "FSDPEngineConfig",
    "FSDPOptimizerConfig",
    "ForwardConfig",
    "HFModelConfig",
    "LogProbConfig",
    "McoreEngineConfig",
    "MegatronEngineConfig",
    "MultiTurnConfig",
    "OptimConfig",
    "OverlongBufferConfig",
    "PPOUpdateConfig",
    "PolicyLossConfig",
    "RefConfig",
    "RewardModelConfig",
    "RolloutConfig",
    "SamplingConfig",
    "resolve_model_path",
]
