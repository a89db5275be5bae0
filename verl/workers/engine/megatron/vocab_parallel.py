"""Log-probabilities and entropy over a vocabulary split across tensor-parallel ranks.

Each rank holds ``logits (T, V / tp)`` for its slice ``[start, start + V / tp)`` of the vocabulary. With the
global max ``m`` and ``Z = sum_v exp(z_v - m)`` (summed over ranks):

    log p(y) = (z_y - m) - log Z
    H        = log Z - sum_v p_v (z_v - m)

The cross-rank sums use megatron-core's ``reduce_from_tensor_model_parallel_region`` (all-reduce forward,
identity backward): every rank computes the same loss from the same reduced values, so each rank's gradient with
respect to its own logits is the gradient of that one loss.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _reduce(tensor: torch.Tensor, group) -> torch.Tensor:
    if group is None or dist.get_world_size(group) == 1:
        return tensor
    from megatron.core.tensor_parallel import reduce_from_tensor_model_parallel_region

    return reduce_from_tensor_model_parallel_region(tensor, group=group)


def vocab_parallel_log_probs_entropy(
    logits: torch.Tensor, labels: torch.Tensor, vocab_start: int, group=None, calculate_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(log_probs (T,), entropy (T,) | None)`` of ``logits (T, V_local)`` (already divided by the temperature)
    at ``labels (T,)`` (global vocabulary ids)."""
    logits = logits.float()
    local_max = logits.detach().max(dim=-1).values
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(local_max, op=dist.ReduceOp.MAX, group=group)
    shifted = logits - local_max[:, None]
    exp = shifted.exp()
    sum_exp = _reduce(exp.sum(dim=-1), group)
    log_z = sum_exp.log()
    local_labels = labels - vocab_start
    in_range = (local_labels >= 0) & (local_labels < logits.shape[-1])
    picked = shifted.gather(-1, local_labels.clamp(0, logits.shape[-1] - 1)[:, None])[:, 0]
    label_logit = _reduce(torch.where(in_range, picked, torch.zeros_like(picked)), group)
    log_probs = label_logit - log_z
    if not calculate_entropy:
        return log_probs, None
    expected = _reduce((exp * shifted).sum(dim=-1), group) / sum_exp
    return log_probs, log_z - expected
