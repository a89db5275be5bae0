"""REINFORCE++ (Hu, arXiv:2501.03262) and its group-baseline variant."""

from __future__ import annotations

import numpy as np
import torch

from ..masked_ops import group_mean_std, masked_whiten
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.REINFORCE_PLUS_PLUS)
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Discounted return ``G_t = r_t + gamma * G_{t+1}`` (reset at padding), whitened over the batch.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``: ``returns = G``, ``advantages = whiten(G)``, zero outside
        the mask.
    """
    with torch.no_grad():
        mask = response_mask.to(token_level_rewards.dtype)
        returns = torch.zeros_like(token_level_rewards)
        running_return = torch.zeros_like(token_level_rewards[:, 0])
        for t in reversed(range(token_level_rewards.shape[-1])):
            running_return = token_level_rewards[:, t] + gamma * running_return
            returns[:, t] = running_return
            running_return = running_return * mask[:, t]
        advantages = masked_whiten(returns, mask) * mask
    return advantages, returns


@register_adv_est(AdvantageEstimator.REINFORCE_PLUS_PLUS_BASELINE)
def compute_reinforce_plus_plus_baseline_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++-baseline: ``A_i = s_i - mean_g(s)`` broadcast over tokens, then whitened over the batch.

    ``s_i = sum_t r_{i,t}``; a group of one has mean 0.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, equal, zero outside the mask.
    """
    with torch.no_grad():
        mask = response_mask.to(token_level_rewards.dtype)
        scores = token_level_rewards.sum(dim=-1)
        group_mean, _, _ = group_mean_std(scores, index)
        advantages = (scores - group_mean).unsqueeze(-1) * mask
        advantages = masked_whiten(advantages, mask) * mask
    return advantages, advantages
