"""PPO clipped surrogate with asymmetric clip range and dual clip."""

from __future__ import annotations

from typing import Any

import torch

from ..masked_ops import masked_mean
from ..registry import register_policy_loss
from .common import approx_kl, clip_bounds, log_ratio_and_ratio, metrics, reduce_policy_loss, require_config


@register_policy_loss("vanilla")
def compute_policy_loss_vanilla(
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
    """PPO-clip (Schulman et al., arXiv:1707.06347, eq. 7) with dual clip (Ye et al., arXiv:1912.09729, eq. 5).

    ``r = exp(log_prob - old_log_prob)``; ``L = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))`` (clip-higher:
    DAPO, arXiv:2503.14476); for ``A < 0`` the loss is further capped: ``L = min(L, -A c)`` with
    ``c = clip_ratio_c > 1``. Metrics: ``pg_clipfrac`` (tokens where the clipped term is active),
    ``pg_clipfrac_lower`` (negative-advantage tokens capped by the dual clip), ``ppo_kl``.
    """
    config = require_config(config, "vanilla")
    bounds = clip_bounds(config)
    if bounds.dual_clip_c <= 1.0:
        raise ValueError(f"actor.clip_ratio_c must be > 1 for dual-clip PPO, got {bounds.dual_clip_c}")
    log_ratio, ratio = log_ratio_and_ratio(log_prob, old_log_prob)

    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - bounds.low, 1 + bounds.high)
    clip_loss = torch.maximum(unclipped, clipped)
    pg_clipfrac = masked_mean(torch.gt(clipped, unclipped).float(), response_mask)

    dual_clip_cap = -advantages * bounds.dual_clip_c
    dual_clipped = torch.minimum(dual_clip_cap, clip_loss)
    pg_clipfrac_lower = masked_mean((torch.gt(clip_loss, dual_clip_cap) & (advantages < 0)).float(), response_mask)
    pg_losses = torch.where(advantages < 0, dual_clipped, clip_loss)

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, loss_agg_mode, rollout_is_weights, global_num_tokens, global_num_seqs
    )
    return pg_loss, metrics(pg_clipfrac, pg_clipfrac_lower, approx_kl(log_ratio, response_mask))
