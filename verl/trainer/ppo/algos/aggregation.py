"""Loss aggregation: reduce a ``(bs, T)`` loss matrix to the scalar that is back-propagated.

Modes (``actor.loss_agg_mode``), with ``m`` the loss mask, ``l`` the loss matrix and ``S`` the set of
sequences with at least one unmasked token:

* ``token-mean``:              ``sum_{i,t} m l / N_tok``                     (DAPO, arXiv:2503.14476 eq. 8)
* ``seq-mean-token-sum``:      ``sum_{i in S} (sum_t m l) / N_seq``
* ``seq-mean-token-mean``:     ``sum_{i in S} (sum_t m l / sum_t m) / N_seq`` (GRPO, arXiv:2402.03300 eq. 3)
* ``seq-mean-token-sum-norm``: ``sum_{i in S} (sum_t m l / L) / N_seq``     (Dr. GRPO, arXiv:2503.20783), with
  ``L = loss_scale_factor`` or ``T`` (a constant, so every token weighs the same whatever the length)

``N_tok`` / ``N_seq`` are the token / non-empty-sequence counts of *this* call unless the caller passes
``global_num_tokens`` / ``global_num_seqs``: the counts over the whole mini-batch on all data-parallel
ranks. With those, summing the per-micro-batch results over micro-batches and ranks gives exactly the
whole-batch value (each micro-batch's loss is its share of the global mean, not its own mean).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

AggFn = Callable[[torch.Tensor, torch.Tensor, "float | None", "float | None", "float | None"], torch.Tensor]


def _denominator(local_count: torch.Tensor, global_count: float | int | torch.Tensor | None) -> torch.Tensor:
    if global_count is None:
        return local_count.clamp(min=1)
    return torch.as_tensor(global_count, dtype=local_count.dtype, device=local_count.device).clamp(min=1)


def _token_mean(loss_mat, loss_mask, global_num_tokens, global_num_seqs, loss_scale_factor):
    return (loss_mat * loss_mask).sum() / _denominator(loss_mask.sum().to(loss_mat.dtype), global_num_tokens)


def _seq_reduce(per_seq: torch.Tensor, loss_mask: torch.Tensor, global_num_seqs) -> torch.Tensor:
    non_empty = (loss_mask.sum(dim=-1) > 0).to(per_seq.dtype)
    return (per_seq * non_empty).sum() / _denominator(non_empty.sum(), global_num_seqs)


def _seq_mean_token_sum(loss_mat, loss_mask, global_num_tokens, global_num_seqs, loss_scale_factor):
    return _seq_reduce((loss_mat * loss_mask).sum(dim=-1), loss_mask, global_num_seqs)


def _seq_mean_token_mean(loss_mat, loss_mask, global_num_tokens, global_num_seqs, loss_scale_factor):
    token_counts = loss_mask.sum(dim=-1).to(loss_mat.dtype).clamp(min=1)
    return _seq_reduce((loss_mat * loss_mask).sum(dim=-1) / token_counts, loss_mask, global_num_seqs)


def _seq_mean_token_sum_norm(loss_mat, loss_mask, global_num_tokens, global_num_seqs, loss_scale_factor):
    scale = loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor
    return _seq_reduce((loss_mat * loss_mask).sum(dim=-1) / scale, loss_mask, global_num_seqs)


LOSS_AGG_MODES: dict[str, AggFn] = {
    "token-mean": _token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    *,
    global_num_tokens: float | int | torch.Tensor | None = None,
    global_num_seqs: float | int | torch.Tensor | None = None,
    loss_scale_factor: float | int | None = None,
) -> torch.Tensor:
    """Aggregate ``loss_mat (bs, T)`` under ``loss_mask (bs, T)`` into a scalar (see the module docstring).

    An all-zero mask gives 0 (never NaN). Low-precision inputs are reduced (and returned) in float32.
    """
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"Unknown loss_agg_mode {loss_agg_mode!r}; choose one of {sorted(LOSS_AGG_MODES)}")
    if loss_mat.shape != loss_mask.shape:
        raise ValueError(f"loss_mat {tuple(loss_mat.shape)} and loss_mask {tuple(loss_mask.shape)} must match")
    # Sums and counts of a large batch are not representable in bf16/fp16: reduce in at least float32.
    loss_mat = loss_mat.to(torch.promote_types(loss_mat.dtype, torch.float32))
    mask = loss_mask.to(loss_mat.dtype)
    return LOSS_AGG_MODES[loss_agg_mode](loss_mat, mask, global_num_tokens, global_num_seqs, loss_scale_factor)
