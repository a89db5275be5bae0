"""Soft Adaptive Policy Optimization: a smooth sigmoid gate in place of the hard PPO clip."""

from __future__ import annotations

from typing import Any

import torch

from ..masked_ops import masked_mean
from ..registry import register_policy_loss
from .common import approx_kl, clip_bounds, log_ratio_and_ratio, metrics, reduce_policy_loss, require_config


@register_policy_loss("sapo")
def compute_policy_loss_sapo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
    global_num_tokens: Any = None,
    global_num_seqs: Any = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """SAPO (Gao et al., arXiv:2511.20347, eq. 5-6): ``L = -f(r) A`` with ``f(r) = (4 / tau) sigmoid(tau (r - 1))``.

    ``tau = tau_pos`` (actor config ``tau_pos``, default 1.0) where ``A > 0`` and ``tau_neg`` (default 1.05)
    otherwise; ``f'(1) = 1`` so at ``r = 1`` the gradient equals the policy gradient. Nothing is clipped;
    ``pg_clipfrac`` / ``pg_clipfrac_lower`` report the fraction of tokens with ``r`` above / below the PPO band
    ``[1 - clip_ratio_low, 1 + clip_ratio_high]`` for comparison.
    """
    config = require_config(config, "sapo")
    tau_pos, tau_neg = config.tau_pos, config.tau_neg
    if tau_pos <= 0 or tau_neg <= 0:
        raise ValueError(f"actor.tau_pos and actor.tau_neg must be > 0, got {tau_pos}, {tau_neg}")
    bounds = clip_bounds(config)
    log_ratio, ratio = log_ratio_and_ratio(log_prob, old_log_prob)
    tau = torch.where(advantages > 0, torch.full_like(ratio, tau_pos), torch.full_like(ratio, tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    pg_losses = -gate * advantages

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, loss_agg_mode, rollout_is_weights, global_num_tokens, global_num_seqs
    )
    above = masked_mean((ratio > 1 + bounds.high).float(), response_mask)
    below = masked_mean((ratio < 1 - bounds.low).float(), response_mask)
    return pg_loss, metrics(above, below, approx_kl(log_ratio, response_mask))
