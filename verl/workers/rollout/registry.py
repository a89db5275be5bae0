"""Rollout backends by name: the only way the workers pick ``hf``, ``vllm`` or ``sglang``.

Built-in backends register on first lookup (importing vLLM or SGLang takes seconds, so neither is imported
eagerly); config validation reads the names from the source without importing any engine.
"""

from __future__ import annotations

from collections.abc import Callable

from verl.utils.registry import Registry

ROLLOUT_REGISTRY: Registry[type] = Registry(
    "rollout", "actor_rollout_ref.rollout.name", package="verl.workers.rollout", decorator="register_rollout"
)
ROLLOUT_REGISTRY.pin("trtllm", "the TensorRT-LLM rollout", 14)


def register_rollout(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_rollout("vllm")`` makes the class available as ``rollout.name=vllm``."""
    return ROLLOUT_REGISTRY.register(name)


def get_rollout_class(name: str) -> type:
    """The rollout class registered as ``name``; unknown names fail listing the registered ones."""
    return ROLLOUT_REGISTRY.get(name)
