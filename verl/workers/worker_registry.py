"""Worker classes by training ``strategy``: which module's ``ActorRolloutRefWorker`` / ``CriticWorker`` /
``RewardModelWorker`` a run uses.

The engines themselves are registered in :mod:`verl.workers.engine.registry`; an engine whose roles differ from
FSDP's (Megatron: pipeline schedule, data-parallel dispatch mesh) brings its own workers and registers them here,
so the trainer never names a worker module. A strategy module registers a function returning its classes::

    @register_workers("megatron")
    def megatron_workers() -> WorkerClasses: ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from verl.utils.registry import Registry

WORKER_REGISTRY: Registry[Callable[[], WorkerClasses]] = Registry(
    "training workers", "actor_rollout_ref.actor.strategy", package="verl.workers", decorator="register_workers"
)


@dataclass(frozen=True)
class WorkerClasses:
    """The worker classes of one training strategy."""

    actor_rollout_ref: type
    """``ActorRolloutRefWorker(config, role)``: actor, rollout and reference roles."""

    critic: type
    """``CriticWorker(config)``: the value model."""

    reward_model: type
    """``RewardModelWorker(config)``: the frozen reward model (picked by ``reward_model.strategy``)."""


def register_workers(name: str) -> Callable:
    """Decorator of a function returning the :class:`WorkerClasses` of strategy ``name``."""
    return WORKER_REGISTRY.register(name)


def get_worker_classes(strategy: str) -> WorkerClasses:
    """The worker classes of ``strategy`` (imports only the module that registers it)."""
    return WORKER_REGISTRY.get(strategy)()
