"""Backend-independent pieces of the single controller: workers, registration, worker groups."""

from verl.single_controller.base.future import DataProtoFuture
from verl.single_controller.base.worker import Worker
from verl.single_controller.base.worker_group import ClassWithInitArgs, ResourcePool, WorkerGroup

__all__ = ["ClassWithInitArgs", "DataProtoFuture", "ResourcePool", "Worker", "WorkerGroup"]
