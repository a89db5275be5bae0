"""Whole tensors from FSDP2's sharded ones, a bucket of them per collective.

FSDP2 shards every parameter along dim 0 over a one-dimensional mesh, as ``torch.chunk`` splits it: rank ``r`` holds
rows ``[r * c, min((r + 1) * c, rows))`` with ``c = ceil(rows / world)`` (the last ranks may hold fewer rows, or none).
Gathering them one ``DTensor.full_tensor`` at a time costs one collective and the DTensor dispatch per tensor, 273 of
each for SmolLM2 on every weight sync (session 29: the sync took 0.13-0.23 s on two H200s against 0.05 s on one).
Here consecutive row-sharded tensors of one mesh and dtype are gathered together: a bucket of plain
``all_gather_into_tensor`` calls, each shard padded to ``c`` rows, coalesced into one collective. Every other tensor
(replicated, sharded on another dim, on a two-dimensional mesh) takes ``full_tensor`` as before. Which tensors share
a collective depends only on their global shape, placements, mesh and dtype, so every rank makes the same
collectives in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard

__all__ = ["full_tensor", "iter_full_tensors"]


def holds_whole(tensor: DTensor) -> bool:
    """True when this rank's local tensor is the whole tensor: a mesh of one rank, or every placement replicated."""
    return tensor.device_mesh.size() == 1 or all(placement.is_replicate() for placement in tensor.placements)


def full_tensor(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Unsharded copy of ``tensor`` (a collective for a sharded DTensor; a detach otherwise), cast to ``dtype`` first
    when given (a floating-point shard is cast before the gather, so a bf16 target moves half the bytes of fp32).

    A DTensor whose local tensor is already whole (one rank, the usual single-GPU run) is taken as that plain tensor:
    each DTensor op costs host time (for SmolLM2's 273 tensors on one CPU rank, ``full_tensor`` took 12 ms where the
    plain tensors take 2 ms; with the bf16 cast, 90 against 63 ms), and the weight sync is on every step's path."""
    if isinstance(tensor, DTensor) and holds_whole(tensor):
        tensor = tensor.to_local()  # (what ``full_tensor`` returns there too, after a redistribute's host work)
    if dtype is not None and tensor.is_floating_point():
        tensor = tensor.detach().to(dtype)
    if isinstance(tensor, DTensor):
        return tensor.full_tensor()
    return tensor.detach()


def _row_sharded(tensor: torch.Tensor) -> bool:
    """A DTensor split along dim 0 over a one-dimensional mesh of several ranks (FSDP2's layout)."""
    return (
        isinstance(tensor, DTensor)
        and tensor.device_mesh.ndim == 1
        and tensor.device_mesh.size() > 1
        and tensor.ndim >= 1
        and tuple(tensor.placements) == (Shard(0),)
    )


def _gathered_dtype(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.dtype:
    return dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype


def _gather_rows(bucket: list[tuple[str, DTensor]], dtype: torch.dtype | None) -> list[tuple[str, torch.Tensor]]:
    """Whole tensors of ``bucket`` (row-sharded on one mesh, one gathered dtype): one ``all_gather_into_tensor`` a
    tensor, all of them coalesced into one collective (one NCCL group launch).

    Each rank sends its rows padded to ``c`` rows, so tensor ``i``'s output ``[world * c_i, *row shape]`` holds the
    ranks' chunks one after another: the whole tensor's rows in order, then the padding, cut off by a view. A
    rank's shard is copied only to cast it or to pad it; the gathered tensors are the outputs themselves."""
    mesh = bucket[0][1].device_mesh
    world, rank, group = mesh.size(), mesh.get_local_rank(), mesh.get_group()
    gathered_dtype = _gathered_dtype(bucket[0][1], dtype)
    sends: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    for name, tensor in bucket:
        rows, row_shape = tensor.shape[0], tuple(tensor.shape[1:])
        chunk_rows = math.ceil(rows / world)
        local = tensor.to_local().detach()
        local_rows = max(0, min(chunk_rows, rows - rank * chunk_rows))
        if tuple(local.shape) != (local_rows, *row_shape):
            raise RuntimeError(
                f"{name}: rank {rank} holds a shard of shape {tuple(local.shape)}; FSDP2's dim-0 split of "
                f"{tuple(tensor.shape)} over {world} ranks gives {(local_rows, *row_shape)}"
            )
        if local_rows < chunk_rows:  # the padding rows are never read back
            padded = local.new_empty((chunk_rows, *row_shape), dtype=gathered_dtype)
            padded[:local_rows].copy_(local)
            local = padded
        sends.append(local.to(gathered_dtype).contiguous())
        outputs.append(local.new_empty((world * chunk_rows, *row_shape), dtype=gathered_dtype))
    with dist._coalescing_manager(group=group, async_ops=True) as coalesced:
        for output, send in zip(outputs, sends, strict=True):
            dist.all_gather_into_tensor(output, send, group=group)
    coalesced.wait()
    return [(name, output[: tensor.shape[0]]) for (name, tensor), output in zip(bucket, outputs, strict=True)]


def iter_full_tensors(
    pairs: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int, dtype: torch.dtype | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, full_tensor(tensor, dtype))`` for every pair, in order; consecutive row-sharded tensors of one mesh
    and gathered dtype go through one collective per about ``bucket_bytes`` of whole tensors.

    A collective: every rank must pass the same names and global shapes in the same order and consume the iterator.
    The whole tensors of a bucket are yielded after its collective."""
    bucket: list[tuple[str, DTensor]] = []
    bucket_key: tuple | None = None
    size = 0
    for name, tensor in pairs:
        if not _row_sharded(tensor):
            if bucket:
                yield from _gather_rows(bucket, dtype)
                bucket, size = [], 0
            yield name, full_tensor(tensor, dtype)
            continue
        gathered_dtype = _gathered_dtype(tensor, dtype)
        key = (tensor.device_mesh, gathered_dtype)
        if bucket and key != bucket_key:
            yield from _gather_rows(bucket, dtype)
            bucket, size = [], 0
        bucket.append((name, tensor))
        bucket_key = key
        size += tensor.numel() * gathered_dtype.itemsize
        if size >= bucket_bytes:
            yield from _gather_rows(bucket, dtype)
            bucket, size = [], 0
    if bucket:
        yield from _gather_rows(bucket, dtype)
