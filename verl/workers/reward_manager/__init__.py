"""Reward managers turn a rollout batch into token-level scores; pick one by ``reward_model.reward_manager``."""

# Importing the modules registers their managers.
from verl.workers.reward_manager.batch import BatchRewardManager  # noqa: E402
from verl.workers.reward_manager.dapo import DAPORewardManager  # noqa: E402
from verl.workers.reward_manager.naive import NaiveRewardManager  # noqa: E402
from verl.workers.reward_manager.prime import PrimeRewardManager  # noqa: E402
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY, get_reward_manager_cls, register

__all__ = [
    "REWARD_MANAGER_REGISTRY",
    "BatchRewardManager",
    "DAPORewardManager",
    "NaiveRewardManager",
    "PrimeRewardManager",
    "get_reward_manager_cls",
    "register",
]
