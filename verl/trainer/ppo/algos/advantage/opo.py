"""On-Policy RL with Optimal reward baseline (OPO, Hao et al., arXiv:2505.23585, eq. 5)."""

from __future__ import annotations

import numpy as np
import torch

from ..masked_ops import group_ids
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.OPO)
def compute_opo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Length-weighted group baseline ``b_g = sum_{j in g} |o_j| s_j / sum_{j in g} |o_j|``; ``A_i = s_i - b_g``.

    ``|o_j|`` is the response length (mask sum) and ``s_j = sum_t r_{j,t}``. A group of one (or of empty
    responses) has baseline 0.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, equal, zero outside the mask.
    """
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        lengths = response_mask.sum(dim=-1).to(scores.dtype)
        ids, num_groups = group_ids(index, scores.device)

        def per_group_sum(x: torch.Tensor) -> torch.Tensor:
            return torch.zeros(num_groups, dtype=scores.dtype, device=scores.device).index_add_(0, ids, x)[ids]

        sizes = per_group_sum(torch.ones_like(scores))
        weighted = per_group_sum(lengths * scores)
        total_length = per_group_sum(lengths)
        baseline = torch.where(
            (sizes > 1) & (total_length > 0), weighted / total_length.clamp(min=1), torch.zeros_like(scores)
        )
        advantages = (scores - baseline).unsqueeze(-1) * response_mask
    return advantages, advantages
