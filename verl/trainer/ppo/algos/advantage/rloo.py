"""REINFORCE Leave-One-Out (Ahmadian et al., arXiv:2402.14740, eq. 6)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..masked_ops import group_ids
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.RLOO, group_baseline=True)
def compute_rloo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``A_i = s_i - (1 / (n_g - 1)) * sum_{j in g, j != i} s_j`` with ``s_i = sum_t r_{i,t}``.

    Equivalently ``A_i = (n_g * s_i - sum_g s) / (n_g - 1)``. A group of one has an empty leave-one-out
    baseline (0), so ``A_i = s_i``. Broadcast over the response tokens.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, equal, zero outside the mask.
    """
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        ids, num_groups = group_ids(index, scores.device)
        sizes = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(
            0, ids, torch.ones_like(scores)
        )[ids]
        sums = torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(0, ids, scores)[ids]
        leave_one_out_mean = (sums - scores) / (sizes - 1).clamp(min=1)
        advantage = scores - leave_one_out_mean
        advantages = advantage.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est(AdvantageEstimator.RLOO_VECTORIZED, group_baseline=True)
def compute_rloo_vectorized_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's name and signature for vectorised RLOO: :func:`compute_rloo_outcome_advantage`, which already computes
    every group at once; ``epsilon`` and ``config`` are accepted and unused (the leave-one-out mean divides by
    ``n_g - 1`` clamped to 1)."""
    return compute_rloo_outcome_advantage(token_level_rewards, response_mask, index)
