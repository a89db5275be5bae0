"""The single controller on Ray: resource pools, worker groups, colocated roles."""

from verl.single_controller.ray.base import (
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    ResourcePoolManager,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
    create_colocated_worker_cls,
)

__all__ = [
    "RayClassWithInitArgs",
    "RayResourcePool",
    "RayWorkerGroup",
    "ResourcePoolManager",
    "WorkerDiedError",
    "WorkerError",
    "WorkerTimeoutError",
    "create_colocated_worker_cls",
]
