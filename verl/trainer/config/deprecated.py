"""verl's deprecated global micro-batch keys, turned into their per-worker spellings at validation.

Older verl command lines set ``ppo_micro_batch_size`` / ``log_prob_micro_batch_size`` as totals over all
workers; verl divides them by the world size. :func:`apply_deprecated_micro_batch_sizes` does the same once,
so the components only ever read the ``*_per_gpu`` keys.
"""

from __future__ import annotations

from verl.trainer.config.megatron_checks import data_parallel_size
from verl.trainer.config.root import PPOConfig


def _per_worker(total: int, world: int, key: str, target: str) -> tuple[int | None, str | None]:
    if total % world or total < world:
        return None, (
            f"{key}={total} (deprecated, a total over all workers) must be a positive multiple of "
            f"trainer.n_gpus_per_node * trainer.nnodes = {world}; set {target} instead"
        )
    return total // world, None


def apply_deprecated_micro_batch_sizes(cfg: PPOConfig) -> list[str]:
    """Fill ``*_per_gpu`` micro-batch sizes from the deprecated global keys that are set; return errors."""
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    errors = []
    roles = [("actor_rollout_ref.actor", cfg.actor_rollout_ref.actor), ("critic", cfg.critic)]
    for key, role in roles:
        if role.ppo_micro_batch_size is not None:
            target = f"{key}.ppo_micro_batch_size_per_gpu"
            dp = data_parallel_size(role, world)  # Megatron: per data-parallel rank
            value, error = _per_worker(role.ppo_micro_batch_size, dp, f"{key}.ppo_micro_batch_size", target)
            if error:
                errors.append(error)
            else:
                role.ppo_micro_batch_size_per_gpu = value
    log_prob_roles = [("actor_rollout_ref.rollout", cfg.actor_rollout_ref.rollout)]
    if cfg.actor_rollout_ref.ref is not None:
        log_prob_roles.append(("actor_rollout_ref.ref", cfg.actor_rollout_ref.ref))
    for key, role in log_prob_roles:
        if role.log_prob_micro_batch_size is not None:
            target = f"{key}.log_prob_micro_batch_size_per_gpu"
            value, error = _per_worker(
                role.log_prob_micro_batch_size, world, f"{key}.log_prob_micro_batch_size", target
            )
            if error:
                errors.append(error)
            else:
                role.log_prob_micro_batch_size_per_gpu = value
    rm = cfg.reward_model
    if rm.micro_batch_size is not None:
        rm_world = rm.n_gpus_per_node * rm.nnodes if rm.enable_resource_pool else world
        rm_dp = data_parallel_size(rm, max(rm_world, 1))  # Megatron: per data-parallel rank
        target = "reward_model.micro_batch_size_per_gpu"
        value, error = _per_worker(rm.micro_batch_size, rm_dp, "reward_model.micro_batch_size", target)
        if error:
            errors.append(error)
        else:
            rm.micro_batch_size_per_gpu = value
    return errors
