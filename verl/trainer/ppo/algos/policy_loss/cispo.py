"""Clipped IS-weight Policy Optimization (CISPO, MiniMax-M1, arXiv:2506.13585, eq. 4-5)."""

from __future__ import annotations

from typing import Any

import torch

from ..masked_ops import masked_mean
from ..registry import register_policy_loss
from .common import approx_kl, clip_bounds, log_ratio_and_ratio, metrics, reduce_policy_loss, require_config


@register_policy_loss("cispo")
def compute_policy_loss_cispo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
    global_num_tokens: Any = None,
    global_num_seqs: Any = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``L = -sg[clip(r, 1 - eps_low, 1 + eps_high)] * A * log_prob``: the IS weight is clipped and detached, so
    every token keeps a policy gradient (unlike PPO, where clipped tokens get none).

    ``pg_clipfrac`` / ``pg_clipfrac_lower``: fraction of tokens whose ratio was clipped from above / below.
    """
    config = require_config(config, "cispo")
    bounds = clip_bounds(config)
    log_ratio, ratio = log_ratio_and_ratio(log_prob, old_log_prob)
    clipped_weight = torch.clamp(ratio, 1 - bounds.low, 1 + bounds.high).detach()
    pg_losses = -clipped_weight * advantages * log_prob

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, loss_agg_mode, rollout_is_weights, global_num_tokens, global_num_seqs
    )
    above = masked_mean((ratio > 1 + bounds.high).float(), response_mask)
    below = masked_mean((ratio < 1 - bounds.low).float(), response_mask)
    return pg_loss, metrics(above, below, approx_kl(log_ratio, response_mask))
