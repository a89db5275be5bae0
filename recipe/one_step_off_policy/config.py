"""Config of the one-step off-policy recipe: the PPO tree plus the rollout pool (verl's ``rollout.nnodes`` /
``rollout.n_gpus_per_node``) and ``actor_rollout_ref.hybrid_engine=False``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verl.trainer.config.extend import extend_config
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.schema import register_schema
from verl.trainer.ppo.utils import need_reward_baselines
from verl.workers.config.base import BaseConfig, bounded_field, choice_field

ROLLOUT_POOL = "rollout_pool"
"""Name of the resource pool the rollout worker group runs on."""

SCHEMA_NAME = "one_step_off_ppo_trainer_schema"


@dataclass
class RolloutPoolConfig(BaseConfig):
    """Devices of the generation pool; the actor (and reference, critic) keep ``trainer.nnodes`` x
    ``trainer.n_gpus_per_node``."""

    nnodes: int = bounded_field(1, gt=0)
    """Nodes the rollout pool spans."""

    n_gpus_per_node: int = bounded_field(1, gt=0)
    """Rollout processes (GPUs) per node."""


def rollout_pool(config: Any) -> dict[str, list[int]]:
    return {ROLLOUT_POOL: [int(config.rollout.n_gpus_per_node)] * int(config.rollout.nnodes)}


def one_step_off_errors(config: Any) -> list[str]:
    """What the pipelined loop cannot do, and the rollout pool's arithmetic."""
    errors = []
    rollout = config.actor_rollout_ref.rollout
    rollout_world = int(config.rollout.n_gpus_per_node) * int(config.rollout.nnodes)
    if rollout_world % rollout.tensor_model_parallel_size:
        errors.append(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={rollout.tensor_model_parallel_size} must divide "
            f"rollout.n_gpus_per_node * rollout.nnodes = {rollout_world}"
        )
    if rollout.mode != "sync":
        errors.append(
            f"actor_rollout_ref.rollout.mode={rollout.mode!r}: the one-step pipeline drives the rollout pool with "
            "batched generation calls; set mode=sync"
        )
    if config.algorithm.filter_groups.enable:
        errors.append(
            "algorithm.filter_groups.enable=True (dynamic sampling) is not available with one-step off-policy "
            "training (generation is launched one batch ahead); set it to False"
        )
    if need_reward_baselines(config):
        errors.append(
            f"algorithm.adv_estimator={config.algorithm.adv_estimator} needs a greedy baseline rollout per step, "
            "which the one-step pipeline does not run; pick grpo, rloo, reinforce_plus_plus or gae"
        )
    roles = config.trainer.placement.roles or {}
    if "rollout" in roles or "actor_rollout" in roles:
        errors.append(
            "trainer.placement.roles cannot place 'rollout' or 'actor_rollout' in this recipe: the rollout pool is "
            "rollout.nnodes x rollout.n_gpus_per_node and the actor runs on global_pool"
        )
    return errors


OneStepOffConfig = extend_config(
    PPOConfig,
    "OneStepOffConfig",
    {
        "rollout": RolloutPoolConfig,
        "actor_rollout_ref.hybrid_engine": (bool, choice_field(False, (False,))),
    },
    checks=one_step_off_errors,
    namespace={
        "worker_groups": ("actor", "rollout"),
        "recipe_pools": rollout_pool,
        "recipe_roles": {"rollout": ROLLOUT_POOL},
    },
)
"""``one_step_off_ppo_trainer.yaml``'s tree: :class:`PPOConfig` + ``rollout`` + ``hybrid_engine: false``."""

register_schema(SCHEMA_NAME, f"{__name__}:OneStepOffConfig")
