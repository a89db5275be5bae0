"""Building the worker groups of a run: each role's worker class, placed on its resource pool.

Roles that share a pool are fused into one Ray actor per rank (``create_colocated_worker_cls``), so on one
machine the actor, rollout, reference policy and critic share a process per device and hand memory to each
other; ``spawn`` then gives one handle per role.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from verl.single_controller.ray import RayClassWithInitArgs, create_colocated_worker_cls
from verl.trainer.ppo.utils import Role

__all__ = ["build_worker_groups", "WORKER_GROUP_NAMES"]

# Role -> (name of its worker group, the config section its worker receives (None: the whole config), the ``role``
# argument or None)
WORKER_GROUP_NAMES: dict[Role, tuple[str, str | None, str | None]] = {
    Role.ActorRollout: ("actor_rollout", "actor_rollout_ref", "actor_rollout"),
    Role.ActorRolloutRef: ("actor_rollout", "actor_rollout_ref", "actor_rollout_ref"),
    Role.RefPolicy: ("ref", "actor_rollout_ref", "ref"),
    Role.Actor: ("actor", "actor_rollout_ref", "actor"),
    Role.Rollout: ("rollout", "actor_rollout_ref", "rollout"),
    Role.Critic: ("critic", "critic", None),
    Role.RewardModel: ("rm", "reward_model", None),
}


def build_worker_groups(
    config: Any,
    role_worker_mapping: dict[Role, type],
    resource_pool_manager: Any,
    ray_worker_group_cls: type,
    device_name: str | None = None,
    group_names: dict[Any, tuple[str, str | None, str | None]] | None = None,
) -> dict[str, Any]:
    """Create the resource pools and one worker group per role; returns ``{"actor_rollout": wg, ...}``.

    ``group_names`` adds or replaces entries of :data:`WORKER_GROUP_NAMES` (a recipe's roles). Models are not
    loaded here: the caller runs ``init_model`` on each group (the actor last, so that the rollout engine can size
    its cache after the other models took their memory).
    """
    names = {**WORKER_GROUP_NAMES, **(group_names or {})}
    resource_pool_manager.create_resource_pool()
    classes_per_pool: dict[Any, dict[str, RayClassWithInitArgs]] = defaultdict(dict)
    for role, worker_cls in role_worker_mapping.items():
        if role not in names:
            raise ValueError(f"No worker group is defined for {role}; known roles: {list(names)}")
        group_name, section, role_arg = names[role]
        init_kwargs = {"config": getattr(config, section) if section else config}
        if role_arg is not None:
            init_kwargs["role"] = role_arg
        pool = resource_pool_manager.get_resource_pool(role)
        classes_per_pool[pool][group_name] = RayClassWithInitArgs(cls=worker_cls, **init_kwargs)

    worker_groups: dict[str, Any] = {}
    for pool, class_dict in classes_per_pool.items():
        colocated_cls = create_colocated_worker_cls(class_dict=class_dict)
        kwargs = {"device_name": device_name} if device_name else {}
        kwargs["ray_wait_register_center_timeout"] = config.trainer.ray_wait_register_center_timeout
        fused_group = ray_worker_group_cls(resource_pool=pool, ray_cls_with_init=colocated_cls, **kwargs)
        worker_groups.update(fused_group.spawn(prefix_set=class_dict.keys()))
    return worker_groups
