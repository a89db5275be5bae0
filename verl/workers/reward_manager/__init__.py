"""Reward managers turn a rollout batch into token-level scores; pick one by ``reward_model.reward_manager``.

The manager classes are imported on first use (they pull in torch), so reading the registry stays cheap.
"""

from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY, get_reward_manager_cls, register

_CLASSES = {
    "AbstractRewardManager": "verl.workers.reward_manager.abstract",
    "BatchRewardManager": "verl.workers.reward_manager.batch",
    "DAPORewardManager": "verl.workers.reward_manager.dapo",
    "NaiveRewardManager": "verl.workers.reward_manager.naive",
    "PrimeRewardManager": "verl.workers.reward_manager.prime",
}

__all__ = ["REWARD_MANAGER_REGISTRY", "get_reward_manager_cls", "register", *_CLASSES]


def __getattr__(name: str):
    if name in _CLASSES:
        import importlib

        return getattr(importlib.import_module(_CLASSES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
