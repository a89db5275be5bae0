"""Log-probabilities and entropy over a vocabulary split across tensor-parallel ranks, a chunk of rows at a time.

Each rank holds ``logits (T, V / tp)`` for its slice ``[start, start + V / tp)`` of the vocabulary. With the
tempered logits ``z = logits / temperature``, the global row max ``m`` and ``Z = sum_v exp(z_v - m)`` (summed over
ranks)::

    log p(y) = (z_y - m) - log Z
    H        = log Z - sum_v p_v (z_v - m)

and the gradients with respect to this rank's logits (Bishop, PRML §4.3.4 for the softmax Jacobian)::

    d log p(y) / d z_j = 1[j = y] - p_j            d H / d z_j = -p_j (log p_j + H)

Every rank computes the same loss from the same reduced values, and each rank's gradient is that loss's gradient
with respect to its own logits, so the backward needs no communication.

As :mod:`verl.utils.chunked_logprobs` (the FSDP engine's head), at most one float32 chunk of ``rows_per_chunk``
rows exists besides the model's logits, in forward and backward: the forward keeps only the per-row statistics,
the backward recomputes ``p`` a chunk at a time and writes the gradient into the logits' own storage. Two
all-reduces per call (the row maxima; then the sums of all rows at once).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from verl.utils.chunked_logprobs import (
    _chunk_backward,
    _reduction_dtype,
    _tempered,
    logits_grad_by_chunks,
    rows_per_chunk,
)


def _all_reduce(tensor: torch.Tensor, op, group) -> None:
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(tensor, op=op, group=group)


class _VocabParallelLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, vocab_start: int, group, temperature: float, with_entropy: bool, chunk_rows: int):
        ctx.set_materialize_grads(False)
        num_rows, local_vocab = logits.shape
        dtype = _reduction_dtype(logits.dtype)
        local_labels = labels - vocab_start
        label_here = (local_labels >= 0) & (local_labels < local_vocab)
        local_labels = local_labels.clamp(0, local_vocab - 1)
        # max(z / temperature) = max(z) / temperature (temperature > 0); a dtype conversion keeps the order
        row_max = logits.detach().amax(dim=-1).to(dtype).div_(temperature)
        _all_reduce(row_max, dist.ReduceOp.MAX, group)
        # rows: sum_v exp(z_v - m), z_y - m (0 off this rank), sum_v exp(z_v - m) (z_v - m)
        sums = torch.zeros(3 if with_entropy else 2, num_rows, dtype=dtype, device=logits.device)
        for start in range(0, num_rows, chunk_rows):
            rows = slice(start, start + chunk_rows)
            shifted = _tempered(logits[rows], temperature).sub_(row_max[rows, None])
            picked = shifted.gather(1, local_labels[rows, None])[:, 0]
            sums[1, rows] = torch.where(label_here[rows], picked, 0.0)
            if with_entropy:
                exp = shifted.exp()
                sums[0, rows] = exp.sum(dim=-1)
                sums[2, rows] = torch.linalg.vecdot(exp, shifted, dim=-1)
            else:
                sums[0, rows] = shifted.exp_().sum(dim=-1)
        _all_reduce(sums, dist.ReduceOp.SUM, group)
        log_z = sums[0].log()
        log_prob = sums[1] - log_z
        entropy = log_z - sums[2] / sums[0] if with_entropy else None
        ctx.save_for_backward(logits, local_labels, label_here, row_max + log_z, entropy)
        ctx.temperature, ctx.chunk_rows = temperature, chunk_rows
        # the backward writes into the logits' storage, which only this function reads (the model made them)
        ctx.inplace = not logits.is_leaf
        return log_prob, entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_log_prob, grad_entropy):
        logits, local_labels, label_here, lse, entropy = ctx.saved_tensors
        grad_logits = logits_grad_by_chunks(
            _chunk_backward, logits, local_labels, lse, entropy, grad_log_prob, grad_entropy, ctx.temperature,
            ctx.chunk_rows, ctx.inplace, label_here=label_here,
        )  # fmt: skip
        return grad_logits, None, None, None, None, None, None


def vocab_parallel_log_probs_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    vocab_start: int,
    group=None,
    calculate_entropy: bool = False,
    temperature: float = 1.0,
    chunk_rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log_probs (T,), entropy (T,) | None)``, float32 (float64 for float64 logits), of
    ``softmax(logits / temperature)`` at ``labels (T,)`` (global vocabulary ids) from this rank's
    ``logits (T, V_local)`` in any float dtype. The backward overwrites a non-leaf ``logits`` with its gradient."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs; got {temperature}")
    if logits.dim() != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(f"expected (T, V) logits and (T,) labels; got {tuple(logits.shape)} and {tuple(labels.shape)}")
    chunk_rows = chunk_rows or rows_per_chunk(logits.shape[1], logits.device)
    args = (logits, labels.long(), int(vocab_start), group, float(temperature), calculate_entropy, chunk_rows)
    return _VocabParallelLogProbs.apply(*args)
