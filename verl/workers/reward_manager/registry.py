"""Name -> reward manager class, the one dispatch path for ``reward_model.reward_manager``."""

from __future__ import annotations

from collections.abc import Callable

REWARD_MANAGER_REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator adding a reward manager under ``name`` (a second, different class is refused)."""

    def decorate(cls: type) -> type:
        existing = REWARD_MANAGER_REGISTRY.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(f"reward manager {name!r} is already registered as {existing.__qualname__}")
        REWARD_MANAGER_REGISTRY[name] = cls
        return cls

    return decorate


def get_reward_manager_cls(name: str) -> type:
    """The class registered as ``name``; unknown names fail listing the registered ones."""
    if name not in REWARD_MANAGER_REGISTRY:
        raise ValueError(
            f"Unknown reward manager {name!r} (reward_model.reward_manager). "
            f"Registered: {sorted(REWARD_MANAGER_REGISTRY)}. Add one with "
            "@verl.workers.reward_manager.register(name)."
        )
    return REWARD_MANAGER_REGISTRY[name]
