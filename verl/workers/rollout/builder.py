"""Compose a rollout and its weight-sync manager from the configs: how the FSDP worker gets both."""

from __future__ import annotations

from typing import Any

from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.registry import get_rollout_class
from verl.workers.sharding_manager.base import BaseShardingManager


def build_rollout(
    rollout_config: Any, model_config: Any, tokenizer: Any, actor_module: Any, device_mesh: Any = None
) -> tuple[BaseRollout, BaseShardingManager]:
    """``(rollout, sharding_manager)`` for ``rollout_config.name``.

    ``actor_module`` is the (FSDP-wrapped) actor: ``hf`` generates with it, ``vllm`` copies its weights into the
    engine on each ``with sharding_manager:`` (so ``load_format: dummy`` is enough at start-up). Use::

        with sharding_manager:
            batch = sharding_manager.preprocess_data(prompts)
            output = sharding_manager.postprocess_data(rollout.generate_sequences(batch))
        metrics.update(sharding_manager.metrics)  # timing_s/update_weights, perf/rollout_memory_gb, ...
    """
    rollout_cls = get_rollout_class(rollout_config.name)
    rollout = rollout_cls(
        config=rollout_config,
        model_config=model_config,
        tokenizer=tokenizer,
        actor_module=actor_module,
        device_mesh=device_mesh,
    )
    return rollout, rollout.make_sharding_manager(actor_module)
