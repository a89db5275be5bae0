"""Geometric-Mean Policy Optimization (GMPO, Zhao et al., arXiv:2507.20673, eq. 4)."""

from __future__ import annotations

from typing import Any

import torch

from ..masked_ops import masked_mean
from ..registry import register_policy_loss
from .common import approx_kl, clip_bounds, metrics, reduce_policy_loss, require_config


@register_policy_loss("geo_mean")
def compute_policy_loss_geo_mean(
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
    """``L_i = -A_i * exp((1/|y_i|) sum_t clip_A(log r_{i,t}))``: PPO on the geometric mean of token ratios.

    Token log-ratios are clipped *in log space* to ``[-clip_ratio_low, clip_ratio_high]`` (GMPO uses 0.4,
    i.e. ratios in ``(e^-0.4, e^0.4)``), pessimistically for the sign of ``A``:
    ``clip_A(x) = sgn(A) min(sgn(A) x, sgn(A) clamp(x))``. ``A_i`` is the token-mean advantage of the sequence.
    The objective is a mean over sequences: the per-sequence loss is broadcast over its tokens and
    aggregated with ``seq-mean-token-mean`` whatever ``loss_agg_mode`` says. ``rollout_is_weights`` enter as
    their per-sequence geometric mean. ``pg_clipfrac`` / ``pg_clipfrac_lower``: fraction of tokens clipped with
    ``A > 0`` / ``A < 0``.
    """
    config = require_config(config, "geo_mean")
    bounds = clip_bounds(config)
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    clamped_log_ratio = torch.clamp(log_ratio, min=-bounds.low, max=bounds.high)
    sign = torch.sign(advantages)
    pessimistic_log_ratio = sign * torch.minimum(sign * log_ratio, sign * clamped_log_ratio)

    seq_lengths = response_mask.sum(dim=-1).clamp(min=1)
    seq_ratio = torch.exp((pessimistic_log_ratio * response_mask).sum(dim=-1) / seq_lengths)
    seq_advantage = (advantages * response_mask).sum(dim=-1) / seq_lengths
    seq_losses = -seq_advantage * seq_ratio
    if rollout_is_weights is not None:
        log_weights = torch.log(rollout_is_weights.detach().clamp(min=1e-10))
        seq_losses = seq_losses * torch.exp((log_weights * response_mask).sum(dim=-1) / seq_lengths)
    pg_losses = seq_losses.unsqueeze(-1).expand_as(advantages)

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, "seq-mean-token-mean", None, global_num_tokens, global_num_seqs
    )
    was_clipped = torch.ne(log_ratio, clamped_log_ratio)
    pg_clipfrac = masked_mean((was_clipped & (advantages > 0)).float(), response_mask)
    pg_clipfrac_lower = masked_mean((was_clipped & (advantages < 0)).float(), response_mask)
    return pg_loss, metrics(pg_clipfrac, pg_clipfrac_lower, approx_kl(log_ratio, response_mask))
