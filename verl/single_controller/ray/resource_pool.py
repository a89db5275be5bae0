"""Ray resource pools: placement groups that reserve one bundle per worker process, packed per node.

``RayResourcePool([4, 4])`` reserves two placement groups (one per node, ``STRICT_PACK``) of four bundles each.
A bundle is ``{"CPU": 1, "GPU": 1}`` on a GPU cluster and ``{"CPU": 1}`` when the pool runs on CPU (``use_gpu=False``,
or no GPU in the cluster). ``max_colocate_count`` worker groups can share the pool's bundles: each of their actors
asks for ``1 / max_colocate_count`` of a bundle.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, placement_group_table, remove_placement_group

from verl.single_controller.base.worker_group import ResourcePool

logger = logging.getLogger(__name__)

PLACEMENT_GROUP_TIMEOUT_S = 120.0


def cluster_has_gpus() -> bool:
    """Whether the connected Ray cluster has any GPU."""
    return ray.cluster_resources().get("GPU", 0) > 0


def _unreserved_resources() -> dict[str, float]:
    """Cluster resources still free, without the per-placement-group bookkeeping entries."""
    return {
        key: value
        for key, value in ray.available_resources().items()
        if "_group_" not in key and not key.startswith("node:")
    }


class RayResourcePool(ResourcePool):
    """Placement groups for ``process_on_nodes[i]`` workers on node i (see the module docstring)."""

    def __init__(
        self,
        process_on_nodes: list[int] | None = None,
        use_gpu: bool = True,
        name_prefix: str | None = None,
        max_colocate_count: int = 10,
        detached: bool = False,
        accelerator_type: str | None = None,
        cpus_per_bundle: float = 1,
    ) -> None:
        super().__init__(process_on_nodes, max_colocate_count)
        self.use_gpu = use_gpu
        self.name_prefix = name_prefix or ""
        self.detached = detached
        self.accelerator_type = accelerator_type
        self.cpus_per_bundle = cpus_per_bundle
        self.pgs: list[PlacementGroup] | None = None

    def _resolve_use_gpu(self) -> bool:
        if self.use_gpu and not cluster_has_gpus():
            logger.warning("RayResourcePool %r: the Ray cluster has no GPU; using CPU-only bundles", self.name_prefix)
            self.use_gpu = False
        return self.use_gpu

    def bundle(self, device_name: str = "cuda") -> dict[str, float]:
        """Resources of one bundle."""
        bundle: dict[str, float] = {"CPU": self.cpus_per_bundle}
        if self.use_gpu:
            bundle["GPU" if device_name == "cuda" else device_name] = 1
            if self.accelerator_type is not None:
                bundle[self.accelerator_type] = 1e-4
        return bundle

    def get_placement_groups(
        self, strategy: str = "STRICT_PACK", name: str | None = None, device_name: str = "cuda"
    ) -> list[PlacementGroup]:
        """The pool's placement groups, reserved on first use; fails clearly if the cluster cannot hold them."""
        if self.pgs is not None:
            return self.pgs
        self._resolve_use_gpu()
        bundle = self.bundle(device_name)
        lifetime = "detached" if self.detached else None
        # Placement-group names are cluster-wide unique: a random tag keeps pools with equal shapes apart.
        pg_name = name or f"{self.name_prefix}verl_group_{'_'.join(map(str, self._store))}_{uuid.uuid4().hex[:6]}:"
        pgs = [
            placement_group(
                bundles=[dict(bundle) for _ in range(process_count)],
                strategy=strategy,
                name=f"{pg_name}{node_index}",
                lifetime=lifetime,
            )
            for node_index, process_count in enumerate(self._store)
        ]
        for node_index, pg in enumerate(pgs):
            if not pg.wait(timeout_seconds=PLACEMENT_GROUP_TIMEOUT_S):
                for created in pgs:
                    remove_placement_group(created)
                raise RuntimeError(
                    f"RayResourcePool {self.name_prefix!r}: could not reserve {self._store[node_index]} bundles of "
                    f"{bundle} on one node within {PLACEMENT_GROUP_TIMEOUT_S}s (pool {self._store}). Unreserved in "
                    f"the cluster: {_unreserved_resources()}; reduce the pool, release other pools "
                    "(remove_placement_groups) or add nodes (`ray start --address`)."
                )
        self.pgs = pgs
        return pgs

    def bundle_slots(self, device_name: str = "cuda") -> list[tuple[PlacementGroup, int]]:
        """``(placement group, bundle index)`` of every worker of the pool, in rank order."""
        return [
            (pg, index) for pg in self.get_placement_groups(device_name=device_name) for index in range(pg.bundle_count)
        ]

    def bundle_node_ids(self) -> list[str]:
        """Node id of every bundle, in rank order."""
        tables: dict[int, dict] = {}
        node_ids = []
        for pg, index in self.bundle_slots():
            table = tables.setdefault(id(pg), placement_group_table(pg)["bundles_to_node_id"])
            node_ids.append(table[index])
        return node_ids

    def remove_placement_groups(self) -> None:
        """Give the reserved resources back (worker groups on this pool must be gone)."""
        for pg in self.pgs or []:
            remove_placement_group(pg)
        self.pgs = None


class SubRayResourcePool(RayResourcePool):
    """Ranks ``[start, start + size)`` of a parent pool's bundles: a worker group spawned on it uses only those
    (its placement groups are the parent's, reserved once). Made by :func:`split_resource_pool`."""

    def __init__(self, parent: RayResourcePool, start: int, size: int, name_prefix: str) -> None:
        super().__init__(
            process_on_nodes=list(parent.store),
            use_gpu=parent.use_gpu,
            name_prefix=name_prefix,
            max_colocate_count=parent.max_colocate_count,
            detached=parent.detached,
            accelerator_type=parent.accelerator_type,
            cpus_per_bundle=parent.cpus_per_bundle,
        )
        self.parent, self.start_bundle_index, self.subgroup_world_size = parent, start, size

    @property
    def world_size(self) -> int:
        return self.subgroup_world_size

    def get_placement_groups(self, strategy: str = "STRICT_PACK", name: str | None = None, device_name: str = "cuda"):
        pgs = self.parent.get_placement_groups(strategy=strategy, name=name, device_name=device_name)
        self.use_gpu = self.parent.use_gpu
        return pgs

    def bundle_slots(self, device_name: str = "cuda") -> list[tuple[PlacementGroup, int]]:
        self.get_placement_groups(device_name=device_name)
        slots = self.parent.bundle_slots(device_name)
        return slots[self.start_bundle_index : self.start_bundle_index + self.subgroup_world_size]

    def remove_placement_groups(self) -> None:
        """The parent owns the placement groups: a view releases nothing."""


def split_resource_pool(resource_pool: RayResourcePool, split_size: int | list[int]) -> list[SubRayResourcePool]:
    """Consecutive views of ``resource_pool``'s ranks: ``world_size / split_size`` views of ``split_size`` ranks, or
    one view per entry of a list of sizes (which must sum to the world size). A view can be split again."""
    world = resource_pool.world_size
    sizes = [split_size] * (world // split_size) if isinstance(split_size, int) else list(split_size)
    if isinstance(split_size, int) and (split_size <= 0 or world % split_size):
        raise ValueError(f"split_size={split_size} must divide the pool's world size {world}")
    if any(size <= 0 for size in sizes) or sum(sizes) != world:
        raise ValueError(f"split sizes {sizes} must be positive and sum to the pool's world size {world}")
    parent = resource_pool.parent if isinstance(resource_pool, SubRayResourcePool) else resource_pool
    offset = resource_pool.start_bundle_index if isinstance(resource_pool, SubRayResourcePool) else 0
    views = []
    for index, size in enumerate(sizes):
        views.append(SubRayResourcePool(parent, offset, size, f"{resource_pool.name_prefix}split{index}_"))
        offset += size
    return views


def merge_resource_pool(rp1: RayResourcePool, rp2: RayResourcePool) -> RayResourcePool:
    """One pool holding the nodes (and the already reserved placement groups) of ``rp1`` then ``rp2``."""
    for attribute in ("use_gpu", "max_colocate_count", "detached"):
        if getattr(rp1, attribute) != getattr(rp2, attribute):
            raise ValueError(
                f"cannot merge pools with different {attribute}: {getattr(rp1, attribute)} vs {getattr(rp2, attribute)}"
            )
    merged = RayResourcePool(
        process_on_nodes=list(rp1.store) + list(rp2.store),
        use_gpu=rp1.use_gpu,
        name_prefix=f"{rp1.name_prefix}{rp2.name_prefix}",
        max_colocate_count=rp1.max_colocate_count,
        detached=rp1.detached,
        accelerator_type=rp1.accelerator_type,
        cpus_per_bundle=rp1.cpus_per_bundle,
    )
    merged.pgs = rp1.get_placement_groups() + rp2.get_placement_groups()
    return merged


@dataclass
class ResourcePoolManager:
    """Maps roles (``Role.ActorRollout``, ``"critic"``, ...) to named resource pools.

    ``resource_pool_spec``: pool name → processes per node; ``mapping``: role → pool name. Roles mapped to the same
    pool are colocated (one actor per bundle holds them all), hence ``max_colocate_count=1``.
    """

    resource_pool_spec: dict[str, list[int]]
    mapping: dict[Any, str]
    resource_pool_dict: dict[str, RayResourcePool] = field(default_factory=dict)
    use_gpu: bool | None = None

    def create_resource_pool(self) -> None:
        """Check the cluster can hold every pool, then create them (placement groups are reserved on first use)."""
        unknown = sorted({str(pool) for pool in self.mapping.values() if pool not in self.resource_pool_spec})
        if unknown:
            known = sorted(self.resource_pool_spec)
            raise ValueError(f"mapping names pools {unknown} that resource_pool_spec lacks; known pools: {known}")
        use_gpu = cluster_has_gpus() if self.use_gpu is None else self.use_gpu
        for pool_name, process_on_nodes in self.resource_pool_spec.items():
            self.resource_pool_dict[pool_name] = RayResourcePool(
                process_on_nodes=process_on_nodes, use_gpu=use_gpu, max_colocate_count=1, name_prefix=pool_name
            )
        self._check_resource_available(use_gpu)

    def get_resource_pool(self, role: Any) -> RayResourcePool:
        """The pool a role runs on."""
        if role not in self.mapping:
            raise KeyError(f"role {role!r} has no resource pool; mapped roles: {list(self.mapping)}")
        return self.resource_pool_dict[self.mapping[role]]

    def get_n_gpus(self) -> int:
        """Total worker processes over all pools (GPUs on a GPU cluster)."""
        return sum(count for process_on_nodes in self.resource_pool_spec.values() for count in process_on_nodes)

    def _check_resource_available(self, use_gpu: bool) -> None:
        resource = "GPU" if use_gpu else "CPU"
        available = ray.available_resources().get(resource, 0)
        required = self.get_n_gpus()
        if available < required:
            raise ValueError(
                f"resource pools {self.resource_pool_spec} need {required} {resource}s but the Ray cluster has "
                f"{available:g} available; shrink trainer.n_gpus_per_node / trainer.nnodes or add nodes"
            )
