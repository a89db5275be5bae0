"""Who answers ``generate_sequences`` for the trainer, by ``actor_rollout_ref.rollout.mode``.

``sync``: the actor-rollout worker group itself (one batched ``generate`` per worker). ``async``: an
:class:`~verl.experimental.agent_loop.AgentLoopManager` over that group (inference servers and agent loops).
Both take the same generation batch and return the same rollout batch; both have ``world_size`` (what the batch
is padded to a multiple of).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ROLLOUT_MODE_REGISTRY: dict[str, Callable[[Any, Any], Any]] = {}


def register_rollout_mode(name: str) -> Callable[[Callable[[Any, Any], Any]], Callable[[Any, Any], Any]]:
    """Decorator: ``builder(config, actor_rollout_wg)`` returns the generator of ``rollout.mode=<name>``."""

    def decorator(builder: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        ROLLOUT_MODE_REGISTRY[name] = builder
        return builder

    return decorator


@register_rollout_mode("sync")
def _worker_group(config: Any, actor_rollout_wg: Any) -> Any:
    return actor_rollout_wg


@register_rollout_mode("async")
def _agent_loop_manager(config: Any, actor_rollout_wg: Any) -> Any:
    from verl.experimental.agent_loop import AgentLoopManager

    return AgentLoopManager(config, worker_group=actor_rollout_wg)


def build_rollout_generator(config: Any, actor_rollout_wg: Any) -> Any:
    """The generator of ``config.actor_rollout_ref.rollout.mode``; unknown modes list the registered ones."""
    mode = config.actor_rollout_ref.rollout.mode
    if mode not in ROLLOUT_MODE_REGISTRY:
        raise ValueError(
            f"actor_rollout_ref.rollout.mode={mode!r} is unknown; registered: {sorted(ROLLOUT_MODE_REGISTRY)}"
        )
    return ROLLOUT_MODE_REGISTRY[mode](config, actor_rollout_wg)
