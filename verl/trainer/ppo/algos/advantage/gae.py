"""Generalized Advantage Estimation with a critic (Schulman et al., arXiv:1506.02438, eq. 16)."""

from __future__ import annotations

import torch

from ..masked_ops import masked_whiten
from ..registry import AdvantageEstimator, register_adv_est


@register_adv_est(AdvantageEstimator.GAE)
def compute_gae_advantage_return(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the unmasked tokens of each response.

    ``delta_t = r_t + gamma * V_{t+1} - V_t``, ``A_t = delta_t + gamma * lam * A_{t+1}``, ``R_t = A_t + V_t``;
    masked positions are skipped (the recursion carries over them), then ``A`` is whitened over the batch.

    Args:
        token_level_rewards: ``(bs, T)`` per-token rewards.
        values: ``(bs, T)`` critic values ``V_t``.
        response_mask: ``(bs, T)`` 1 on response tokens.
        gamma: discount; lam: GAE lambda.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``; advantages whitened and zero outside the mask.
    """
    with torch.no_grad():
        mask = response_mask.to(values.dtype)
        next_value = torch.zeros_like(values[:, 0])
        running_advantage = torch.zeros_like(values[:, 0])
        advantages_reversed = []
        for t in reversed(range(token_level_rewards.shape[-1])):
            delta = token_level_rewards[:, t] + gamma * next_value - values[:, t]
            candidate = delta + gamma * lam * running_advantage
            # Padding positions leave the recursion state untouched.
            next_value = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_value
            running_advantage = candidate * mask[:, t] + (1 - mask[:, t]) * running_advantage
            advantages_reversed.append(running_advantage)
        advantages = torch.stack(advantages_reversed[::-1], dim=1)
        returns = advantages + values
        advantages = masked_whiten(advantages, mask) * mask
    return advantages, returns
