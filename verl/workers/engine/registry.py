"""Training engines by ``strategy`` name (``actor.strategy``, ``critic.strategy``): the roles build their engine
through :func:`get_engine_cls`, never by naming a class."""

from __future__ import annotations

from collections.abc import Callable

from verl.utils.registry import Registry

ENGINE_REGISTRY: Registry[type] = Registry(
    "training engine", "actor_rollout_ref.actor.strategy", package="verl.workers.engine", decorator="register_engine"
)


def register_engine(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_engine("fsdp2")`` makes the engine available as ``strategy=fsdp2``.

    An engine is constructed as ``cls(model_config, engine_config, optim_config, role=..., use_torch_compile=...)``.
    """
    return ENGINE_REGISTRY.register(name)


def get_engine_cls(name: str) -> type:
    """The engine class registered as ``name``; unknown names fail listing the registered ones."""
    return ENGINE_REGISTRY.get(name)
