"""Typed configs of the trainer side and the whole PPO tree, plus the Hydra YAML presets beside them."""

from verl.trainer.config.algorithm import AlgoConfig, FilterGroupsConfig, KLControlConfig, RolloutCorrectionConfig
from verl.trainer.config.data import BUILTIN_ARITHMETIC, CustomClsConfig, DataConfig
from verl.trainer.config.root import ActorRolloutRefConfig, PPOConfig
from verl.trainer.config.trainer import CustomRewardFunctionConfig, RayInitConfig, RayKwargsConfig, TrainerConfig

__all__ = [
    "ActorRolloutRefConfig",
    "AlgoConfig",
    "BUILTIN_ARITHMETIC",
    "CustomClsConfig",
    "CustomRewardFunctionConfig",
    "DataConfig",
    "FilterGroupsConfig",
    "KLControlConfig",
    "PPOConfig",
    "RayInitConfig",
    "RayKwargsConfig",
    "RolloutCorrectionConfig",
    "TrainerConfig",
]

from verl.trainer.config.schema import register_schemas

register_schemas()
