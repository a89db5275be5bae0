"""Keys of verl's configs that belong to features other work is building: each fails before Ray starts with
"not supported yet: <feature> (issue N)" instead of being accepted and ignored.

Two kinds: :data:`PINNED_KEYS` are key paths (and everything below them) that the schema does not declare yet; a
schema field declared with :func:`verl.workers.config.base.pinned_field` is pinned for the values it cannot take yet
(``reward_model.enable=True``). When the work lands, its engineer adds the fields and deletes the pin.
:data:`RENAMED_KEYS` are older verl spellings that keep working under their current name.
"""

from __future__ import annotations

from verl.utils.registry import Pin

AGENT = Pin("agent-loop tracing (rollout.trace)", 17)
ROLLOUT_PARALLELISM = Pin("data / expert parallelism inside the rollout engine", 14)

PINNED_KEYS: dict[str, Pin] = {
    "actor_rollout_ref.rollout.trace": AGENT,
    "actor_rollout_ref.rollout.data_parallel_size": ROLLOUT_PARALLELISM,
    "actor_rollout_ref.rollout.expert_parallel_size": ROLLOUT_PARALLELISM,
}
"""Key path -> pin, for keys the schema does not declare (a pinned path covers every key below it)."""

CONFIG_NAME_PINS: dict[str, Pin] = {}
"""``--config-name`` values of verl that select a feature not built yet (``ppo_megatron_trainer`` exists now)."""

RENAMED_KEYS: dict[str, str] = {
    "use_rmpad": "use_remove_padding",
    "grad_offload": "offload_policy",
    "sandbox_fusion_url": "sandbox_fusion.url",
}
"""Older verl key names (the last part of a path) -> their current name in the same group. verl's FSDP1
``grad_offload`` kept gradients on the CPU; with FSDP2 that is ``offload_policy`` (CPUOffloadPolicy)."""


def pinned_key(path: str) -> tuple[str, Pin] | None:
    """``(pinned prefix, pin)`` when ``path`` is a pinned key or lies below one."""
    parts = path.split(".")
    for depth in range(len(parts), 0, -1):
        prefix = ".".join(parts[:depth])
        if prefix in PINNED_KEYS:
            return prefix, PINNED_KEYS[prefix]
    return None
