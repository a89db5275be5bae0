"""Optimal Token Baseline (OTB): a per-timestep, variance-weighted group baseline.

Minimising the variance of the policy-gradient estimator token by token gives
``B_t = E[G_t W_t] / E[W_t]`` with ``W_t = sum_{j<=t} ||s_j||^2`` the cumulative squared score norm,
whose per-token proxy for a softmax policy is ``||s_j||^2 ~ 1 - 2 pi_j + sum_v pi_v^2``
(pi_j: probability of the sampled token; ``sum_v pi_v^2`` from the actor, ``calculate_sum_pi_squared``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..masked_ops import group_ids
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.OPTIMAL_TOKEN_BASELINE)
def compute_optimal_token_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    old_log_probs: torch.Tensor,
    sum_pi_squared: torch.Tensor,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = False,
    epsilon: float = 1e-8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """OTB advantage ``A_{i,t} = G_{i,t} - B_{g,t}``.

    ``B_{g,t} = sum_{j in g} G_{j,t} W_{j,t} m_{j,t} / (sum_{j in g} W_{j,t} m_{j,t} + eps)``.

    ``G_{i,t}`` is the undiscounted reward-to-go and ``W_{i,t} = sum_{t'<=t} w_{i,t'} m_{i,t'}`` with
    ``w = 1 - 2 exp(old_log_probs) + sum_pi_squared``, multiplied by ``rollout_is_weights**2`` when given
    (the MSE-optimal baseline under truncated importance sampling). A group of one keeps ``A = G``.
    With ``handle_zero_tail`` the baseline of a group's single longest response is 0 beyond the
    second-longest length (nothing to compare against there).

    Args:
        token_level_rewards, response_mask, old_log_probs, sum_pi_squared, rollout_is_weights: ``(bs, T)``.
        index: ``(bs,)`` group labels.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``; ``returns = G``; advantages zero outside the mask.
    """
    with torch.no_grad():
        mask = response_mask.to(token_level_rewards.dtype)
        returns = (token_level_rewards * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
        score_norm_proxy = 1 - 2 * torch.exp(old_log_probs) + sum_pi_squared
        if rollout_is_weights is not None:
            score_norm_proxy = score_norm_proxy * rollout_is_weights**2
        cumulative_weight = (score_norm_proxy * mask).cumsum(dim=-1)

        ids, num_groups = group_ids(index, returns.device)
        baselines = torch.zeros_like(returns)
        for group in range(num_groups):
            members = torch.nonzero(ids == group, as_tuple=True)[0]
            if members.numel() < 2:
                continue
            weight = cumulative_weight[members] * mask[members]
            numerator = (returns[members] * weight).sum(dim=0)
            baseline = numerator / (weight.sum(dim=0) + epsilon)
            baselines[members] = baseline.to(baselines.dtype).unsqueeze(0)
            if handle_zero_tail:
                lengths = mask[members].sum(dim=-1)
                sorted_lengths = torch.sort(lengths).values
                longest, second = int(sorted_lengths[-1]), int(sorted_lengths[-2])
                is_longest = torch.nonzero(lengths == longest, as_tuple=True)[0]
                if is_longest.numel() == 1 and longest > second:
                    baselines[members[is_longest[0]], second:] = 0.0
        advantages = (returns - baselines) * mask
    return advantages, returns
