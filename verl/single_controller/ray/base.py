"""verl's ``verl.single_controller.ray.base`` names: resource pools, worker groups, colocated classes."""

from verl.single_controller.ray.actor_class import RayClassWithInitArgs, unwrap_ray_remote
from verl.single_controller.ray.colocated import create_colocated_worker_cls, create_colocated_worker_raw_cls
from verl.single_controller.ray.resource_pool import (
    RayResourcePool,
    ResourcePoolManager,
    SubRayResourcePool,
    merge_resource_pool,
    split_resource_pool,
)
from verl.single_controller.ray.results import WorkerDiedError, WorkerError, WorkerTimeoutError
from verl.single_controller.ray.worker_group import RayWorkerGroup

__all__ = [
    "RayClassWithInitArgs",
    "RayResourcePool",
    "RayWorkerGroup",
    "ResourcePoolManager",
    "SubRayResourcePool",
    "WorkerDiedError",
    "WorkerError",
    "WorkerTimeoutError",
    "create_colocated_worker_cls",
    "create_colocated_worker_raw_cls",
    "merge_resource_pool",
    "split_resource_pool",
    "unwrap_ray_remote",
]
