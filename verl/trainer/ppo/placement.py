"""Split placement: which resource pool each worker group runs on, from ``trainer.placement``.

``global_pool`` holds ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` processes; ``trainer.placement.pools`` adds
named pools and ``trainer.placement.roles`` moves worker groups (``actor_rollout``, ``ref``, ``critic``, and the
groups a recipe adds, such as ``rollout`` or ``teacher``) onto them. Groups on one pool are fused into one process
per device (they hand memory to each other); groups on different pools run side by side on their own devices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # config validation imports this module before Ray is needed
    from verl.single_controller.ray import ResourcePoolManager

GLOBAL_POOL = "global_pool"
"""Name of the pool sized by ``trainer.nnodes`` x ``trainer.n_gpus_per_node``."""

BASE_WORKER_GROUPS = ("actor_rollout", "ref", "critic", "rm")
"""Worker groups of the PPO trainer that ``trainer.placement.roles`` may place (``rm``: the reward model)."""

REWARD_POOL = "reward_pool"
"""The reward model's own pool with ``reward_model.enable_resource_pool`` (``reward_model.nnodes`` x
``reward_model.n_gpus_per_node``), verl's keys for a reward model beside the actor."""

WORKER_GROUPS_ATTR = "worker_groups"
"""Class attribute of a recipe's config class listing the extra worker groups it runs."""

__all__ = [
    "BASE_WORKER_GROUPS",
    "GLOBAL_POOL",
    "build_resource_pool_manager",
    "group_name",
    "placement_errors",
    "pool_of",
    "pool_world_size",
    "resource_pool_spec",
]


RECIPE_POOLS_ATTR = "recipe_pools"
"""Class attribute of a recipe's config class: ``fn(config) -> {pool name: processes per node}`` for pools the recipe
sizes from its own keys (the one-step off-policy recipe's ``rollout.nnodes`` x ``rollout.n_gpus_per_node``)."""

RECIPE_ROLES_ATTR = "recipe_roles"
"""Class attribute of a recipe's config class: ``{worker group: pool}`` defaults that ``trainer.placement.roles``
overrides (e.g. ``{rollout: rollout_pool}``)."""


def _reward_pool(config: Any) -> dict[str, list[int]]:
    """``reward_pool`` when a discriminative reward model asks for its own devices, else nothing."""
    reward_model = config.reward_model
    if reward_model.enable and not reward_model.use_reward_loop and reward_model.enable_resource_pool:
        return {REWARD_POOL: [int(reward_model.n_gpus_per_node)] * int(reward_model.nnodes)}
    return {}


def resource_pool_spec(config: Any) -> dict[str, list[int]]:
    """Every pool: ``global_pool``, ``reward_pool``, the recipe's own pools and those of ``trainer.placement.pools``
    (name -> processes per node)."""
    trainer = config.trainer
    spec = {GLOBAL_POOL: [int(trainer.n_gpus_per_node)] * int(trainer.nnodes), **_reward_pool(config)}
    recipe_pools = getattr(type(config), RECIPE_POOLS_ATTR, None)
    if recipe_pools is not None:
        spec.update(recipe_pools(config))
    spec.update({name: [int(n) for n in counts] for name, counts in (trainer.placement.pools or {}).items()})
    return spec


def pool_of(config: Any, group: str) -> str:
    """The pool worker group ``group`` runs on: ``trainer.placement.roles``, else the recipe's default for it, else
    ``global_pool``."""
    defaults = {"rm": REWARD_POOL} if _reward_pool(config) else {}
    defaults.update(getattr(type(config), RECIPE_ROLES_ATTR, {}))
    return (config.trainer.placement.roles or {}).get(group) or defaults.get(group, GLOBAL_POOL)


def pool_world_size(config: Any, group: str) -> int:
    """Processes of the pool that worker group ``group`` runs on (its data-parallel world)."""
    return sum(resource_pool_spec(config)[pool_of(config, group)])


def group_name(role: Any, group_names: dict | None = None) -> str:
    """Worker-group name of a role: ``Role.ActorRollout`` -> ``actor_rollout`` (``WORKER_GROUP_NAMES``, updated by
    ``group_names``); a string role is its own name."""
    if isinstance(role, str):
        return role
    from verl.trainer.ppo.worker_groups import WORKER_GROUP_NAMES

    names = {**WORKER_GROUP_NAMES, **(group_names or {})}
    if role not in names:
        raise ValueError(f"no worker group is defined for {role}; known roles: {list(names)}")
    return names[role][0]


def build_resource_pool_manager(
    config: Any, role_worker_mapping: dict, group_names: dict | None = None
) -> ResourcePoolManager:
    """Pools of the roles in ``role_worker_mapping`` (only pools some role uses are reserved)."""
    from verl.single_controller.ray import ResourcePoolManager

    mapping = {role: pool_of(config, group_name(role, group_names)) for role in role_worker_mapping}
    spec = {name: counts for name, counts in resource_pool_spec(config).items() if name in set(mapping.values())}
    return ResourcePoolManager(resource_pool_spec=spec, mapping=mapping)


def placement_errors(config: Any) -> list[str]:
    """Unknown pools or worker groups, empty pools, and placements a feature forbids; each names the keys."""
    pools, roles = config.trainer.placement.pools or {}, config.trainer.placement.roles or {}
    errors = []
    if GLOBAL_POOL in pools:
        errors.append(
            f"trainer.placement.pools must not redefine {GLOBAL_POOL!r} (it is trainer.nnodes x "
            "trainer.n_gpus_per_node); give the extra pool another name"
        )
    for name, counts in pools.items():
        if not counts or any(int(n) <= 0 for n in counts):
            errors.append(
                f"trainer.placement.pools.{name}={counts} must list a positive process count per node, e.g. [2]"
            )
    known_groups = (*BASE_WORKER_GROUPS, *getattr(type(config), WORKER_GROUPS_ATTR, ()))
    known_pools = set(resource_pool_spec(config))
    for group, pool in roles.items():
        if group not in known_groups:
            errors.append(f"trainer.placement.roles names worker group {group!r}; known groups: {list(known_groups)}")
        if pool not in known_pools:
            errors.append(
                f"trainer.placement.roles.{group}={pool!r} is not a pool; define it in trainer.placement.pools "
                f"(pools now: {sorted(known_pools)})"
            )
    recipe_roles = getattr(type(config), RECIPE_ROLES_ATTR, {})
    unused = sorted(set(pools) - set(roles.values()) - set(recipe_roles.values()))
    if unused:
        errors.append(f"trainer.placement.pools {unused} host no worker group; place a group there or remove them")
    if "ref" in roles and int(config.actor_rollout_ref.model.lora_rank) > 0:
        errors.append(
            "trainer.placement.roles.ref: with LoRA (actor_rollout_ref.model.lora_rank > 0) the reference policy is "
            "the actor with its adapters off and runs in the actor's group; remove the ref placement"
        )
    return errors
