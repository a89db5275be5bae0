"""Name -> reward manager class, the one dispatch path for ``reward_model.reward_manager``."""

from __future__ import annotations

from collections.abc import Callable

from verl.utils.registry import Registry

REWARD_MANAGER_REGISTRY: Registry[type] = Registry(
    "reward manager", "reward_model.reward_manager", package="verl.workers.reward_manager", decorator="register"
)
REWARD_MANAGER_REGISTRY.pin("generative", "verl's generative reward manager (an LLM judge as the reward manager)", 19)


def register(name: str) -> Callable[[type], type]:
    """Class decorator adding a reward manager under ``name`` (a second, different class is refused)."""
    return REWARD_MANAGER_REGISTRY.register(name)


def get_reward_manager_cls(name: str) -> type:
    """The class registered as ``name``; unknown names fail listing the registered ones."""
    return REWARD_MANAGER_REGISTRY.get(name)
