"""Group Sequence Policy Optimization: PPO clipping on a length-normalised sequence ratio."""

from __future__ import annotations

from typing import Any

import torch

from ..masked_ops import masked_mean
from ..registry import register_policy_loss
from .common import approx_kl, clip_bounds, metrics, reduce_policy_loss, require_config


@register_policy_loss("gspo")
def compute_policy_loss_gspo(
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
    """GSPO (Zheng et al., arXiv:2507.18071, eq. 5-7, GSPO-token form).

    ``log s_i = (1/|y_i|) sum_t m_{i,t} (log_prob - old_log_prob)``; the token ratio is
    ``s_{i,t} = exp(sg[log s_i] + log_prob_{i,t} - sg[log_prob_{i,t}])`` (value ``s_i``, gradient of the token),
    clamped at ``exp(10)``; ``L = max(-A s, -A clip(s, 1 - eps_low, 1 + eps_high))``. The paper's objective
    is a mean over sequences, so the loss is always aggregated with ``seq-mean-token-mean`` whatever
    ``loss_agg_mode`` says.
    """
    config = require_config(config, "gspo")
    bounds = clip_bounds(config)
    log_ratio = log_prob - old_log_prob
    seq_lengths = response_mask.sum(dim=-1).clamp(min=1)
    seq_log_ratio = (log_ratio * response_mask).sum(dim=-1) / seq_lengths
    token_log_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(torch.clamp(token_log_ratio, max=10.0))

    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - bounds.low, 1 + bounds.high)
    pg_losses = torch.maximum(unclipped, clipped)
    pg_clipfrac = masked_mean(torch.gt(clipped, unclipped).float(), response_mask)

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, "seq-mean-token-mean", rollout_is_weights, global_num_tokens, global_num_seqs
    )
    return pg_loss, metrics(pg_clipfrac, 0.0, approx_kl(log_ratio, response_mask))
