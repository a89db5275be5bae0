"""Joining (or creating) the torch.distributed world of an offline entry point (SFT, generation)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from verl.utils.distributed import env_describes_multi_rank_world, init_process_group


def resolve_device(device: str) -> str:
    """``cuda`` or ``cpu`` for a config's ``trainer.device`` (``auto`` picks ``cuda`` when torch sees one)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("trainer.device=cuda but torch sees no CUDA device; use trainer.device=cpu or auto")
    return device


def init_distributed(device: str) -> tuple[int, int]:
    """Join the world torchrun describes (``RANK``, ``WORLD_SIZE``, ...) or create a 1-rank world on this host.

    The backend is NCCL on ``cuda`` and gloo on ``cpu``. Returns ``(rank, world_size)``.
    """
    if not dist.is_initialized():
        if device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) if env_describes_multi_rank_world() else 0)
        init_process_group("nccl" if device == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size()


def import_external_lib(module_name: str | None) -> None:
    """Import ``model.external_lib`` (a module that registers custom Hugging Face classes) when set."""
    if module_name:
        import importlib

        importlib.import_module(module_name)


def all_reduce_sum(values: list[float], group=None) -> list[float]:
    """Element-wise sum of ``values`` over the ranks of ``group`` (all ranks when None), in float64."""
    tensor = torch.tensor(values, dtype=torch.float64)
    if dist.is_initialized() and dist.get_world_size() > 1:
        if dist.get_backend() == "nccl":
            tensor = tensor.cuda()
        dist.all_reduce(tensor, group=group)
    return tensor.cpu().tolist()
