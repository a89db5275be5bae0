"""Group Policy Gradient advantage (GPG, Chu et al., arXiv:2504.02546, eq. 8)."""

from __future__ import annotations

import numpy as np
import torch

from ..masked_ops import group_mean_std
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.GPG)
def compute_gpg_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    f_norm: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``A_i = alpha * (s_i - mean_g(s)) / f_norm`` with ``alpha = B / max(M, 1)``.

    ``B`` is the batch size and ``M`` the number of responses with a non-zero score (the paper's
    correction for groups that carry no gradient); a group of one has mean 0.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, equal, zero outside the mask.
    """
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        num_nonzero = torch.count_nonzero(scores).clamp(min=1).to(scores.dtype)
        alpha = scores.shape[0] / num_nonzero
        group_mean, _, _ = group_mean_std(scores, index)
        advantage = alpha * (scores - group_mean) / f_norm
        advantages = advantage.unsqueeze(-1) * response_mask
    return advantages, advantages
