"""The torch.distributed world an in-worker engine needs, and the tensor-parallel layout of a worker group.

Engines inside the worker processes split the world into tensor-parallel groups of consecutive ranks
(``rollout.tensor_model_parallel_size``); the remaining dimension is data parallel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from verl.utils.distributed import free_port, init_process_group

__all__ = [
    "TensorParallelLayout",
    "ensure_process_group",
    "free_port",
    "tensor_parallel_cpu_group",
    "tensor_parallel_layout",
]


def ensure_process_group() -> bool:
    """Make a torch.distributed world exist; True if this call created it.

    Workers started by the single controller (or torchrun) already have one. A standalone process (a script or a
    test) gets a 1-rank world (nccl with CUDA, gloo without) on a free local port; vLLM reads ``RANK`` and
    ``LOCAL_RANK`` from the env.
    """
    if dist.is_initialized():
        os.environ.setdefault("RANK", str(dist.get_rank()))
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", str(dist.get_world_size()))
        return False
    init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return True


@dataclass(frozen=True)
class TensorParallelLayout:
    """This rank's place in its tensor-parallel group: ranks ``[first, first + size)`` of the world."""

    size: int
    rank: int
    first: int

    @property
    def ranks(self) -> list[int]:
        return list(range(self.first, self.first + self.size))


def tensor_parallel_layout(tp_size: int) -> TensorParallelLayout:
    """Consecutive-rank tensor-parallel groups of ``tp_size`` over the current world (which it must divide)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % tp_size:
        raise ValueError(
            f"rollout.tensor_model_parallel_size={tp_size} must divide the number of workers ({world}); "
            "change it or trainer.n_gpus_per_node * trainer.nnodes"
        )
    return TensorParallelLayout(size=tp_size, rank=rank % tp_size, first=rank - rank % tp_size)


def tensor_parallel_cpu_group(layout: TensorParallelLayout):
    """A gloo group of this rank's tensor-parallel group (None for size 1). Every rank of the world must call
    this in the same order: each creates all the world's groups and keeps its own."""
    if layout.size == 1:
        return None
    world = dist.get_world_size()
    own = None
    for first in range(0, world, layout.size):
        group = dist.new_group(list(range(first, first + layout.size)), backend="gloo")
        if first == layout.first:
            own = group
    return own
