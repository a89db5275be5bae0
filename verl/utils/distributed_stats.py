"""Statistics over all ranks of a process group (verl's ``torch_functional`` collectives).

``distributed_mean_max_min_std`` uses Bessel's correction over the global count: ``std = sqrt(sum_r sum_i
(x_ri - mean)^2 / (N - 1))`` with ``N`` the total number of elements of every rank.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["allgather_dict_into_dict", "distributed_masked_mean", "distributed_mean_max_min_std"]


def distributed_mean_max_min_std(
    local_tensor: torch.Tensor, compute_max: bool = True, compute_min: bool = True, compute_std: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``(mean, max, min, std)`` of the elements of ``local_tensor`` over all ranks (None for a disabled one)."""
    stats = torch.stack([local_tensor.sum().to(torch.float64), torch.tensor(local_tensor.numel(), dtype=torch.float64)])
    stats = stats.to(local_tensor.device)
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    total, count = stats[0], stats[1]
    mean = (total / count).to(local_tensor.dtype)
    global_max = global_min = std = None
    if compute_max:
        global_max = local_tensor.max().clone()
        dist.all_reduce(global_max, op=dist.ReduceOp.MAX)
    if compute_min:
        global_min = local_tensor.min().clone()
        dist.all_reduce(global_min, op=dist.ReduceOp.MIN)
    if compute_std:
        squares = (local_tensor.to(torch.float64) - total / count).pow(2).sum()
        dist.all_reduce(squares, op=dist.ReduceOp.SUM)
        std = torch.sqrt(squares / (count - 1)).to(local_tensor.dtype)
    return mean, global_max, global_min, std


def distributed_masked_mean(local_tensor: torch.Tensor, local_mask: torch.Tensor) -> torch.Tensor:
    """``sum(x * mask) / sum(mask)`` with both sums taken over all ranks."""
    stats = torch.stack([(local_tensor * local_mask).sum(), local_mask.sum().to(local_tensor.dtype)])
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    return stats[0] / stats[1]


def allgather_dict_into_dict(data: dict[str, Any], group=None) -> dict[str, list[Any]]:
    """``{key: [value on rank 0, value on rank 1, ...]}`` from each rank's ``{key: value}`` (python objects)."""
    gathered: list[dict[str, Any] | None] = [None] * dist.get_world_size(group=group)
    dist.all_gather_object(gathered, data, group=group)
    return {key: [part[key] for part in gathered] for key in data}
