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
PROFILER = Pin("the step profiler (nsys / torch / NPU profiling of the workers)", 15)
PROFILED_ROLES = (
    "actor_rollout_ref.actor",
    "actor_rollout_ref.rollout",
    "actor_rollout_ref.ref",
    "critic",
    "reward_model",
)
PROFILER_KEYS = ("profiler", "profile_ranks", "profile_ranks_all", "profile_discrete")
"""verl's per-role profiler config (``profiler``) and its older spellings (``profile_ranks`` ...)."""

PINNED_KEYS: dict[str, Pin] = {
    "actor_rollout_ref.rollout.trace": AGENT,
    "actor_rollout_ref.rollout.data_parallel_size": ROLLOUT_PARALLELISM,
    "actor_rollout_ref.rollout.expert_parallel_size": ROLLOUT_PARALLELISM,
    "actor_rollout_ref.rollout.enable_expert_parallel": ROLLOUT_PARALLELISM,
    "actor_rollout_ref.rollout.update_weights_bucket_megabytes": Pin(
        "bucketed weight transfer to a GPU rollout server", 14
    ),
    "actor_rollout_ref.rollout.multi_stage_wake_up": Pin("SGLang's multi-stage memory wake-up", 14),
    "actor_rollout_ref.rollout.max_batch_size": Pin("the TensorRT-LLM rollout", 14),
    "actor_rollout_ref.rollout.prometheus": Pin("Prometheus metrics of the rollout servers", 17),
    "actor_rollout_ref.model.lora": Pin("Megatron LoRA (model.lora through Megatron-Bridge)", 16),
    "actor_rollout_ref.model.mtp": Pin("multi-token prediction (MTP) layers in training and rollout", 16),
    "actor_rollout_ref.distillation": Pin("on-policy distillation from a teacher model", 22),
    "global_profiler": PROFILER,
    "profile": PROFILER,
    "trainer.profile_steps": PROFILER,
    "trainer.profile_continuous_steps": PROFILER,
    **{f"{role}.{key}": PROFILER for role in PROFILED_ROLES for key in PROFILER_KEYS},
}
"""Key path -> pin, for keys the schema does not declare (a pinned path covers every key below it)."""

CONFIG_NAME_PINS: dict[str, Pin] = {}
"""``--config-name`` values of verl that select a feature not built yet (``ppo_megatron_trainer`` exists now)."""

RENAMED_KEYS: dict[str, str] = {
    "use_rmpad": "use_remove_padding",
    "grad_offload": "offload_policy",
    "sandbox_fusion_url": "sandbox_fusion.url",
    "val_generations_to_log_to_wandb": "log_val_generations",
    "compute_sum_pi_squared": "calculate_sum_pi_squared",
    "lr_decay_style": "lr_scheduler_type",
}
"""Older verl key names (the last part of a path) -> their current name in the same group. verl's FSDP1
``grad_offload`` kept gradients on the CPU; with FSDP2 that is ``offload_policy`` (CPUOffloadPolicy). verl's
Megatron optimizer calls the schedule ``lr_decay_style`` (``constant`` / ``cosine`` here)."""


def pinned_key(path: str) -> tuple[str, Pin] | None:
    """``(pinned prefix, pin)`` when ``path`` is a pinned key or lies below one."""
    parts = path.split(".")
    for depth in range(len(parts), 0, -1):
        prefix = ".".join(parts[:depth])
        if prefix in PINNED_KEYS:
            return prefix, PINNED_KEYS[prefix]
    return None
