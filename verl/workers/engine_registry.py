"""Training engines by ``strategy``: the only place that maps ``fsdp``/``fsdp2``/``megatron`` to worker classes.

The trainer asks :func:`get_worker_classes` for the actor-rollout-ref and critic worker classes of a strategy and
never imports an engine module itself; unknown strategies fail listing the registered ones. Modules are imported
on lookup (the Megatron workers import megatron-core).
"""

from __future__ import annotations

import importlib

WORKER_MODULES: dict[str, str] = {
    "fsdp": "verl.workers.fsdp_workers",
    "fsdp2": "verl.workers.fsdp_workers",
    "megatron": "verl.workers.megatron_workers",
}
"""Strategy -> module defining ``ActorRolloutRefWorker`` and ``CriticWorker``."""


def register_strategy(name: str, module: str) -> None:
    """Make ``strategy=name`` use the workers of ``module`` (a dotted path)."""
    existing = WORKER_MODULES.get(name)
    if existing is not None and existing != module:
        raise ValueError(f"strategy {name!r} is already registered to {existing}")
    WORKER_MODULES[name] = module


def get_worker_classes(strategy: str) -> tuple[type, type]:
    """``(ActorRolloutRefWorker, CriticWorker)`` of ``strategy``."""
    if strategy not in WORKER_MODULES:
        raise ValueError(f"unknown training strategy {strategy!r}; registered: {sorted(WORKER_MODULES)}")
    module = importlib.import_module(WORKER_MODULES[strategy])
    return module.ActorRolloutRefWorker, module.CriticWorker
