"""ReMax (Li et al., arXiv:2310.10505, Algorithm 1): reward minus the greedy-rollout reward."""

from __future__ import annotations

import torch

from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.REMAX)
def compute_remax_outcome_advantage(
    token_level_rewards: torch.Tensor,
    reward_baselines: torch.Tensor,
    response_mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``R_t = sum_{t' >= t} r_{t'}`` (undiscounted reward-to-go), ``A_t = R_t - b`` on response tokens.

    Args:
        token_level_rewards: ``(bs, T)``; reward_baselines: ``(bs,)`` reward of the greedy response to the same
            prompt; response_mask: ``(bs, T)``.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``, zero outside the mask.
    """
    with torch.no_grad():
        mask = response_mask.to(token_level_rewards.dtype)
        returns = (token_level_rewards * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
        advantages = (returns - reward_baselines.reshape(-1, 1)) * mask
    return advantages, returns
