"""Critic loss and entropy bonus."""

from __future__ import annotations

from typing import Any

import torch

from .aggregation import agg_loss
from .masked_ops import masked_mean


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
    *,
    global_num_tokens: Any = None,
    global_num_seqs: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss (PPO, arXiv:1707.06347; clipping as in OpenAI baselines ppo2).

    ``v_clip = values + clamp(vpreds - values, -c, c)``;
    ``L = 0.5 * agg(max((vpreds - returns)^2, (v_clip - returns)^2))``.

    Args:
        vpreds: ``(bs, T)`` current critic predictions; returns: ``(bs, T)`` targets; values: ``(bs, T)`` critic
            values at rollout time; response_mask: ``(bs, T)``; cliprange_value: ``c``.

    Returns:
        ``(vf_loss, vf_clipfrac)``: the scalar loss and the fraction of tokens where the clipped term is larger.
    """
    vpred_clipped = values + torch.clamp(vpreds - values, -cliprange_value, cliprange_value)
    unclipped_loss = (vpreds - returns) ** 2
    clipped_loss = (vpred_clipped - returns) ** 2
    vf_loss = 0.5 * agg_loss(
        torch.maximum(unclipped_loss, clipped_loss),
        response_mask,
        loss_agg_mode,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
    )
    vf_clipfrac = masked_mean(torch.gt(clipped_loss, unclipped_loss).float(), response_mask)
    return vf_loss, vf_clipfrac


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy ``H = logsumexp(z) - sum_v softmax(z)_v z_v`` of the categorical over the last dim."""
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def compute_entropy_loss(
    logits: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    global_num_tokens: Any = None,
    global_num_seqs: Any = None,
) -> torch.Tensor:
    """Aggregated token entropy of ``logits (bs, T, V)`` under ``response_mask (bs, T)``; the actor subtracts
    ``entropy_coeff`` times this from its loss (an entropy bonus)."""
    return agg_loss(
        entropy_from_logits(logits),
        response_mask,
        loss_agg_mode,
        global_num_tokens=global_num_tokens,
        global_num_seqs=global_num_seqs,
    )
