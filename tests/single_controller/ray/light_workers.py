"""Worker classes for the single-controller tests that do not import torch (their actors start fast)."""

import os
import threading
import time

import ray

from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register


class ActorRole(Worker):
    """Stands for the actor role of a colocated worker: keeps a counter of its own."""

    def __init__(self, step_size: int) -> None:
        super().__init__()
        self.step_size = step_size
        self.steps = 0
        # Mesh info is per role: the critic living in the same process has none for "actor".
        self._register_dispatch_collect_info("actor", dp_rank=self.rank, is_collect=True)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def step(self) -> int:
        self.steps += self.step_size
        return self.steps

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def where(self) -> tuple[str, int, int]:
        return "actor", self.rank, os.getpid()


class CriticRole(Worker):
    """Stands for the critic role: a method with the same name as the actor's returns something else."""

    def __init__(self, offset: int) -> None:
        super().__init__()
        self.offset = offset

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def where(self) -> tuple[str, int, int]:
        return "critic", self.rank, os.getpid()

    @register(dispatch_mode=Dispatch.ALL_TO_ALL)
    def value(self, x: int) -> int:
        return x + self.offset + self.rank


@ray.remote
class Sleeper(Worker):
    """A worker that sleeps on request, to be killed or timed out mid-call."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def pid(self) -> int:
        return os.getpid()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def nap(self, seconds: float) -> int:
        time.sleep(seconds)
        return self.rank

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def all_reduce_without_rank_one(self) -> float:
        """Every rank joins the process group; rank 1 then skips the all-reduce, so rank 0's must time out."""
        import torch
        import torch.distributed as dist

        self.init_process_group()
        if self.rank == 1:
            return -1.0
        value = torch.ones(1)
        dist.all_reduce(value)
        return float(value.item())


@ray.remote
class NodeReporter(Worker):
    """Reports where it runs and sums a value over the group with gloo (multi-node simulation)."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def placement(self) -> dict:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "local_world_size": self.local_world_size,
            "node_id": ray.get_runtime_context().get_node_id(),
            "master": self.get_master_addr_port(),
        }

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def all_reduce_rank_squares(self) -> float:
        import torch
        import torch.distributed as dist

        self.init_process_group()
        value = torch.tensor([float(self.rank**2)], dtype=torch.float64)
        dist.all_reduce(value)
        return float(value.item())


@ray.remote
class FailsToStart(Worker):
    """Raises in ``__init__`` on one rank."""

    def __init__(self, failing_rank: int) -> None:
        super().__init__()
        if self.rank == failing_rank:
            raise RuntimeError(f"cannot load the model on rank {self.rank}")


class GpuView(Worker):
    """Reports what its process sees of the node's GPUs (on CPU, the GPUs Ray was told the node has)."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def view(self) -> dict:
        return {
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "local_rank": os.environ.get("LOCAL_RANK"),
            "assigned": [str(gpu) for gpu in ray.get_gpu_ids()],
        }


class PerThreadCuda:
    """``torch.cuda``'s current device as CUDA keeps it, one per host thread (device 0 until the thread sets it), for
    a process without GPUs; counts ``set_device`` calls."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.set_calls = 0

    def current_device(self) -> int:
        return getattr(self._local, "device", 0)

    def set_device(self, index: int) -> None:
        self.set_calls += 1
        self._local.device = index


class ThreadedGpuView(Worker):
    """A worker with a concurrency group, as the actor-rollout worker has: Ray runs ``__init__`` and its methods in
    threads of its own. ``torch.cuda`` is replaced by a per-thread fake before ``Worker.__init__`` picks the GPU."""

    ray_concurrency_groups = {"side": 2}

    def __init__(self) -> None:
        import torch

        fake = PerThreadCuda()
        torch.cuda.is_available = lambda: True
        torch.cuda.current_device = fake.current_device
        torch.cuda.set_device = fake.set_device
        super().__init__()
        self.init_thread = threading.get_ident()
        self.init_device = torch.cuda.current_device()

    def _seen(self) -> dict:
        import torch

        return {"device": torch.cuda.current_device(), "thread": threading.get_ident()}

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def view(self) -> dict:
        return {
            "assigned": [str(gpu) for gpu in ray.get_gpu_ids()],
            "init": {"device": self.init_device, "thread": self.init_thread},
            "method": self._seen(),
        }

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    @ray.method(concurrency_group="side")
    def side_view(self) -> dict:
        return self._seen()
