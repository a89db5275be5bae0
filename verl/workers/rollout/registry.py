"""Rollout backends by name: the only way the workers pick ``hf``, ``vllm`` or ``sglang``.

Built-in backends register on first lookup (importing vLLM or SGLang takes seconds, so neither is imported
eagerly); :func:`registered_rollout_names` lists every name without importing any engine, which is what config
validation uses before Ray starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

ROLLOUT_REGISTRY: dict[str, type] = {}
_BUILTIN_MODULES = {
    "hf": "verl.workers.rollout.hf_rollout",
    "vllm": "verl.workers.rollout.vllm_rollout",
    "sglang": "verl.workers.rollout.sglang_rollout",
}
"""Built-in backend name -> module whose import registers it."""


def register_rollout(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_rollout("vllm")`` makes the class available as ``rollout.name=vllm``."""

    def decorator(cls: type) -> type:
        existing = ROLLOUT_REGISTRY.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(f"rollout {name!r} is already registered to {existing.__qualname__}")
        ROLLOUT_REGISTRY[name] = cls
        return cls

    return decorator


def registered_rollout_names() -> list[str]:
    """Every name :func:`get_rollout_class` accepts (built-in ones and those registered so far), sorted."""
    return sorted(set(ROLLOUT_REGISTRY) | set(_BUILTIN_MODULES))


def get_rollout_class(name: str) -> type:
    """The rollout class registered as ``name``; unknown names fail listing the registered ones."""
    if name not in ROLLOUT_REGISTRY and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    if name not in ROLLOUT_REGISTRY:
        raise ValueError(
            f"unknown rollout name {name!r} (actor_rollout_ref.rollout.name); registered: {registered_rollout_names()}"
        )
    return ROLLOUT_REGISTRY[name]
