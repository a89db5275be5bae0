"""Gradient reduction and clipping across the megatron layout.

After the schedule every rank holds the gradient of the loss terms of its own micro-batches. The loss of every
micro-batch is already normalised by the mini-batch's global token/sequence count, so the mini-batch gradient
is the **sum** over data-parallel ranks (not the mean). Besides that sum, two kinds of parameters need a
reduction inside the model-parallel group (as megatron-core's ``finalize_model_grads`` does):

* with pipeline stages and tied embeddings, the first stage's input embedding and the last stage's copy used as
  output layer are one weight: their gradients are summed over the embedding group;
* with sequence parallelism, norm weights see only this rank's slice of the sequence: summed over tensor ranks.

The global gradient norm counts every weight once: tensor-parallel shards are summed over the tensor ranks,
replicated weights (norms, a value head) are taken from tensor rank 0 only, and the last stage's tied copy of
the embedding is skipped; squares are summed over the model-parallel (tensor x pipeline) group.
"""

from __future__ import annotations

import logging
import math

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from verl.workers.engine.megatron.parallel import Ranks

BUCKET_NUMEL = 1 << 24


def _all_reduce_coalesced(tensors: list[torch.Tensor], group) -> None:
    """Sum ``tensors`` in place over ``group``, flattened into buckets of ~``BUCKET_NUMEL`` elements per dtype."""
    by_dtype: dict[tuple, list[torch.Tensor]] = {}
    for tensor in tensors:
        by_dtype.setdefault((tensor.dtype, tensor.device), []).append(tensor)
    for same in by_dtype.values():
        start = 0
        while start < len(same):
            bucket, numel = [], 0
            while start < len(same) and (not bucket or numel + same[start].numel() <= BUCKET_NUMEL):
                bucket.append(same[start])
                numel += same[start].numel()
                start += 1
            flat = _flatten_dense_tensors(bucket)
            dist.all_reduce(flat, group=group)
            for tensor, reduced in zip(bucket, _unflatten_dense_tensors(flat, bucket), strict=True):
                tensor.copy_(reduced)


def ensure_grads(params: list[torch.nn.Parameter]) -> None:
    """Give every parameter a gradient (zeros where the backward produced none) so collectives line up."""
    for param in params:
        if param.grad is None:
            param.grad = torch.zeros_like(param)


def finalize_grads(params: list[torch.nn.Parameter], ranks: Ranks, tied_pairs: list[torch.nn.Parameter]) -> None:
    """Sequence-parallel norm sums (tensor group), tied-embedding sums (embedding group), then the
    data-parallel sum, all in place on ``param.grad``. ``tied_pairs`` are this rank's embedding / tied output
    weights when the pipeline splits a tied model."""
    ensure_grads(params)
    sequence_parallel = [p.grad for p in params if getattr(p, "sequence_parallel", False)]
    if sequence_parallel and ranks.tp_size > 1:
        _all_reduce_coalesced(sequence_parallel, ranks.tp_group)
    if tied_pairs and ranks.in_embedding_group:
        _all_reduce_coalesced([p.grad for p in tied_pairs], ranks.embedding_group)
    if ranks.dp_size > 1:
        _all_reduce_coalesced([p.grad for p in params], ranks.dp_group)


def counts_in_norm(param: torch.nn.Parameter, ranks: Ranks) -> bool:
    """Whether this rank contributes ``param``'s gradient to the global norm (see the module docstring)."""
    if getattr(param, "shared", False):  # last stage's copy of a tied embedding
        return False
    return bool(getattr(param, "tensor_model_parallel", False)) or ranks.tp_rank == 0


def global_grad_norm(params: list[torch.nn.Parameter], ranks: Ranks) -> torch.Tensor:
    """L2 norm of the whole model's gradient (a float64 scalar, equal on every rank)."""
    device = params[0].grad.device
    squares = torch.zeros((), dtype=torch.float64, device=device)
    for param in params:
        if counts_in_norm(param, ranks):
            squares += param.grad.detach().double().pow(2).sum()
    if ranks.tp_size * ranks.pp_size > 1:
        dist.all_reduce(squares, group=ranks.mp_group)
    return squares.sqrt()


def clip_grads(params: list[torch.nn.Parameter], ranks: Ranks, max_norm: float | None) -> float:
    """Scale gradients so their global norm is at most ``max_norm`` (no clipping when None or <= 0); returns the
    pre-clip norm. A non-finite norm leaves the gradients untouched (the caller skips the step)."""
    total = global_grad_norm(params, ranks)
    norm = float(total)
    if not math.isfinite(norm):
        logging.getLogger(__name__).warning("non-finite grad norm %s: skipping this optimizer step", norm)
        return norm
    if max_norm is not None and max_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total.to(params[0].grad.device, torch.float32))
    return norm
