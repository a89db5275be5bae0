"""Typed configs of the worker roles (verl's ``verl.workers.config``)."""

from verl.workers.config.actor import ActorConfig, FSDPActorConfig, PolicyLossConfig
from verl.workers.config.base import BaseConfig
from verl.workers.config.critic import CriticConfig, CriticModelConfig, FSDPCriticConfig
from verl.workers.config.engine import FSDPEngineConfig, MixedPrecisionConfig, WrapPolicyConfig
from verl.workers.config.megatron import McoreEngineConfig, MegatronEngineConfig
from verl.workers.config.model import DEFAULT_MODEL_PATH, HFModelConfig, resolve_model_path
from verl.workers.config.optimizer import OptimConfig
from verl.workers.config.ref import RefConfig
from verl.workers.config.reward_model import OverlongBufferConfig, RewardModelConfig, SandboxFusionConfig
from verl.workers.config.roles import CheckpointConfig, EngineRoleConfig, ForwardConfig, LogProbConfig, PPOUpdateConfig
from verl.workers.config.rollout import AgentLoopConfig, MultiTurnConfig, RolloutConfig, SamplingConfig

FSDPOptimizerConfig = OptimConfig
"""verl's name of the FSDP optimizer config."""

OptimizerConfig = OptimConfig
"""verl's name of the optimizer config base class."""

CriticModelCfg = FSDPCriticModelCfg = CriticModelConfig
"""verl's names of the critic model config."""

__all__ = [
    "ActorConfig",
    "AgentLoopConfig",
    "BaseConfig",
    "CheckpointConfig",
    "CriticConfig",
    "CriticModelCfg",
    "CriticModelConfig",
    "DEFAULT_MODEL_PATH",
    "EngineRoleConfig",
    "FSDPActorConfig",
    "FSDPCriticConfig",
    "FSDPCriticModelCfg",
    "FSDPEngineConfig",
    "FSDPOptimizerConfig",
    "ForwardConfig",
    "HFModelConfig",
    "LogProbConfig",
    "McoreEngineConfig",
    "MegatronEngineConfig",
    "MixedPrecisionConfig",
    "MultiTurnConfig",
    "OptimConfig",
    "OptimizerConfig",
    "OverlongBufferConfig",
    "PPOUpdateConfig",
    "PolicyLossConfig",
    "RefConfig",
    "RewardModelConfig",
    "RolloutConfig",
    "SandboxFusionConfig",
    "SamplingConfig",
    "WrapPolicyConfig",
    "resolve_model_path",
]
