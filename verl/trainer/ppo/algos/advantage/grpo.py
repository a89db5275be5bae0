"""Group-relative outcome advantages: GRPO, Dr. GRPO and the pass@k variant."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..masked_ops import group_ids, group_mean_std
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.GRPO, group_baseline=True)
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO (Shao et al., arXiv:2402.03300, sec. 4.1.2): ``A_i = (s_i - mean_g(s)) / (std_g(s) + eps)``.

    ``s_i = sum_t r_{i,t}`` is the outcome score and ``g`` the group of ``i`` (same ``index``/uid); ``std`` is
    unbiased. With ``norm_adv_by_std_in_grpo=False`` the division is dropped (Dr. GRPO, arXiv:2503.20783).
    A group of one has mean 0 and std 1. ``A_i`` is broadcast over the response tokens.

    Args:
        token_level_rewards: ``(bs, T)``; response_mask: ``(bs, T)``; index: ``(bs,)`` group labels.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, equal, zero outside the mask.
    """
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        group_mean, group_std, _ = group_mean_std(scores, index)
        centered = scores - group_mean
        advantage = centered / (group_std + epsilon) if norm_adv_by_std_in_grpo else centered
        advantages = advantage.unsqueeze(-1) * response_mask
    return advantages, advantages


@register_adv_est(AdvantageEstimator.GRPO_VECTORIZED, group_baseline=True)
def compute_grpo_vectorized_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's name and signature for vectorised GRPO: :func:`compute_grpo_outcome_advantage`, which already computes
    every group at once (scatter sums over group ids); ``config`` is accepted and unused."""
    return compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon, norm_adv_by_std_in_grpo)


@register_adv_est(AdvantageEstimator.GRPO_PASSK, group_baseline=True)
def compute_grpo_passk_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pass@k GRPO (Thrampoulidis et al., arXiv:2503.19595): only the best response of each group learns.

    For each group: ``A_best = s_(1) - s_(2)`` (best minus second-best score), divided by
    ``std_g(s) + eps`` when ``norm_adv_by_std_in_grpo``; every other response gets 0. A group of one
    has no second-best, so all its advantages are 0.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, equal, zero outside the mask.
    """
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        ids, num_groups = group_ids(index, scores.device)
        advantage = torch.zeros_like(scores)
        for group in range(num_groups):
            members = torch.nonzero(ids == group, as_tuple=True)[0]
            if members.numel() < 2:
                continue
            group_scores = scores[members]
            order = torch.argsort(group_scores, descending=True, stable=True)
            gap = group_scores[order[0]] - group_scores[order[1]]
            if norm_adv_by_std_in_grpo:
                gap = gap / (torch.std(group_scores) + epsilon)
            advantage[members[order[0]]] = gap
        advantages = advantage.unsqueeze(-1) * response_mask
    return advantages, advantages
