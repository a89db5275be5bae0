"""Ulysses sequence parallelism: the collectives (Jacobs et al. 2023, "DeepSpeed Ulysses", arXiv:2309.14509).

A sequence of ``T`` tokens is split into ``sp`` contiguous slices of ``T / sp`` tokens, one per rank of a
sequence-parallel group. Everything but attention works token by token, so each rank runs it on its own slice.
Attention needs the whole sequence: an all-to-all turns ``(…, heads, T / sp, …)`` (every head, a slice of the
sequence) into ``(…, heads / sp, T, …)`` (a slice of the heads, the whole sequence), attention runs per head, and
the inverse all-to-all restores the sequence slices. Per-token outputs (log-probs, values) are all-gathered back.

Every function here is differentiable: the backward of an all-to-all is the inverse all-to-all, the backward of
the all-gather keeps this rank's slice of the incoming gradient (each rank's copy of a gathered output feeds the
same loss, so each slice's gradient is taken once, on the rank that produced it).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed import ProcessGroup


def head_split_error(
    num_heads: int, num_kv_heads: int, sp_size: int, key: str = "ulysses_sequence_parallel_size"
) -> str | None:
    """Why ``sp_size`` cannot split attention with ``num_heads`` query and ``num_kv_heads`` KV heads, or None.

    Each rank attends with ``num_heads / sp`` query heads, so ``sp`` must divide them; the KV heads are split the
    same way, or, when there are fewer of them than ranks, replicated, which needs ``sp`` to be a multiple of
    ``num_kv_heads`` (each rank then holds the one KV head its query heads use)."""
    if sp_size <= 1:
        return None
    if num_heads % sp_size:
        divisors = [d for d in range(1, num_heads + 1) if num_heads % d == 0]
        return (
            f"{key}={sp_size} must divide the model's {num_heads} attention heads (each rank attends with "
            f"an equal share of them); use one of {divisors}"
        )
    if num_kv_heads % sp_size and sp_size % num_kv_heads:
        return (
            f"{key}={sp_size} must divide the model's {num_kv_heads} KV heads or be a multiple of them (they are "
            f"then replicated); {sp_size} is neither: use a divisor of {num_kv_heads} or a multiple of it that "
            f"divides {num_heads}"
        )
    return None


def group_size(group: ProcessGroup | None) -> int:
    return dist.get_world_size(group) if group is not None else 1


class _AllToAll(torch.autograd.Function):
    """Split ``x`` into ``sp`` chunks along ``scatter_dim``, send chunk ``j`` to rank ``j``, and concatenate what
    arrives (in rank order) along ``gather_dim``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scatter_dim: int, gather_dim: int, group: ProcessGroup) -> torch.Tensor:
        ctx.scatter_dim, ctx.gather_dim, ctx.group = scatter_dim, gather_dim, group
        return _all_to_all(x, scatter_dim, gather_dim, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _all_to_all(grad, ctx.gather_dim, ctx.scatter_dim, ctx.group), None, None, None


def _all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group: ProcessGroup) -> torch.Tensor:
    size = dist.get_world_size(group)
    if x.shape[scatter_dim] % size:
        raise ValueError(f"all-to-all: dim {scatter_dim} of shape {tuple(x.shape)} does not split into {size} parts")
    send = torch.stack(x.chunk(size, dim=scatter_dim)).contiguous()  # (sp, ...) chunk j goes to rank j
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group)
    return torch.cat(received.unbind(0), dim=gather_dim)


def all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """Differentiable all-to-all over ``group`` (identity without a group or with one rank)."""
    if group_size(group) == 1:
        return x
    return _AllToAll.apply(x, scatter_dim, gather_dim, group)


def sequence_to_heads(x: torch.Tensor, seq_dim: int, head_dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """``(…, heads, T / sp, …)`` on each rank → ``(…, heads / sp, T, …)``: this rank's heads, the whole sequence."""
    return all_to_all(x, scatter_dim=head_dim, gather_dim=seq_dim, group=group)


def heads_to_sequence(x: torch.Tensor, seq_dim: int, head_dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """The inverse of :func:`sequence_to_heads`: ``(…, heads / sp, T, …)`` → ``(…, heads, T / sp, …)``."""
    return all_to_all(x, scatter_dim=seq_dim, gather_dim=head_dim, group=group)


class _GatherSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, group: ProcessGroup) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=dim)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        rank, size = dist.get_rank(ctx.group), dist.get_world_size(ctx.group)
        return grad.chunk(size, dim=ctx.dim)[rank].contiguous(), None, None


def gather_sequence(x: torch.Tensor, dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """Concatenate every rank's slice along ``dim`` (rank order). Backward keeps this rank's slice of the gradient:
    the ranks compute the same loss from the gathered tensor, so the slice's gradient is counted once."""
    if group_size(group) == 1:
        return x
    return _GatherSequence.apply(x, dim, group)


def pad_to_multiple(x: torch.Tensor, multiple: int, dim: int = -1, value: int | float = 0) -> torch.Tensor:
    """``x`` padded at the end of ``dim`` with ``value`` to a length divisible by ``multiple``."""
    pad = -x.shape[dim] % multiple
    if pad == 0:
        return x
    dim = dim % x.dim()
    widths = [0, 0] * (x.dim() - 1 - dim) + [0, pad]
    return F.pad(x, widths, value=value)


def local_slice(x: torch.Tensor, dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """This rank's contiguous slice of ``x`` along ``dim`` (its length must divide by the group size)."""
    size = group_size(group)
    if size == 1:
        return x
    if x.shape[dim] % size:
        raise ValueError(f"dim {dim} of shape {tuple(x.shape)} is not divisible by the sequence-parallel size {size}")
    return x.chunk(size, dim=dim)[dist.get_rank(group)]
