"""Rollout backends by name: the only way the workers pick ``hf`` or ``vllm``.

Built-in backends register on first lookup (importing vLLM takes seconds, so it is never imported eagerly).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

ROLLOUT_REGISTRY: dict[str, type] = {}
_BUILTIN_MODULES = {"hf": "verl.workers.rollout.hf_rollout", "vllm": "verl.workers.rollout.vllm_rollout"}


def register_rollout(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_rollout("vllm")`` makes the class available as ``rollout.name=vllm``."""

    def decorator(cls: type) -> type:
        existing = ROLLOUT_REGISTRY.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(f"rollout {name!r} is already registered to {existing.__qualname__}")
        ROLLOUT_REGISTRY[name] = cls
        return cls

    return decorator


def get_rollout_class(name: str) -> type:
    """The rollout class registered as ``name``; unknown names fail listing the registered ones."""
    if name not in ROLLOUT_REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    if name not in ROLLOUT_REGISTRY:
        known = sorted(set(ROLLOUT_REGISTRY) | set(_BUILTIN_MODULES))
        raise ValueError(f"unknown rollout name {name!r} (actor_rollout_ref.rollout.name); registered: {known}")
    return ROLLOUT_REGISTRY[name]
