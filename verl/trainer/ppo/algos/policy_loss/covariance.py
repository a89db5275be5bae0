"""Clip-Cov and KL-Cov (Cui et al., "The Entropy Mechanism of RL for Reasoning LMs", arXiv:2505.22617, sec. 5).

Both act on the few tokens whose centred covariance ``cov_{i,t} = (A_{i,t} - mean A)(log pi_{i,t} - mean log pi)``
(means over the valid tokens of the batch) is largest: those tokens drive entropy collapse.
"""

from __future__ import annotations

from typing import Any

import torch

from ..masked_ops import masked_mean
from ..registry import register_policy_loss
from .common import (
    approx_kl,
    clip_bounds,
    log_ratio_and_ratio,
    metrics,
    reduce_policy_loss,
    require_config,
)


def _centered_covariance(advantages: torch.Tensor, log_prob: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    log_prob = log_prob.detach()
    return (advantages - masked_mean(advantages, response_mask)) * (log_prob - masked_mean(log_prob, response_mask))


@register_policy_loss("clip_cov")
def compute_policy_loss_clip_cov(
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
    """Clip-Cov (eq. 11): PPO-clip, plus the gradient of a random ``clip_cov_ratio`` fraction of the valid tokens
    with ``clip_cov_lb < cov < clip_cov_ub`` (that PPO did not already clip) is detached.

    ``config.policy_loss``: ``clip_cov_ratio`` (default 0.0002), ``clip_cov_lb`` (1.0), ``clip_cov_ub`` (5.0);
    at least one token is chosen when any qualifies. ``pg_clipfrac`` is the fraction of detached tokens.
    """
    config = require_config(config, "clip_cov")
    bounds = clip_bounds(config)
    clip_cov_ratio = config.policy_loss.clip_cov_ratio
    clip_cov_lb = config.policy_loss.clip_cov_lb
    clip_cov_ub = config.policy_loss.clip_cov_ub
    log_ratio, ratio = log_ratio_and_ratio(log_prob, old_log_prob)

    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - bounds.low, 1 + bounds.high)
    valid = response_mask > 0
    clipped_by_ppo = torch.gt(clipped, unclipped) & valid

    covariance = _centered_covariance(advantages, log_prob, response_mask)
    candidates = valid & ~clipped_by_ppo & (covariance > clip_cov_lb) & (covariance < clip_cov_ub)
    candidate_positions = torch.nonzero(candidates)
    num_to_detach = max(int(clip_cov_ratio * valid.sum().item()), 1)
    chosen = candidate_positions[torch.randperm(len(candidate_positions))[:num_to_detach]]

    keep_gradient = torch.ones_like(advantages)
    keep_gradient[chosen[:, 0], chosen[:, 1]] = 0.0
    pg_losses = torch.maximum(unclipped, clipped) * keep_gradient

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, loss_agg_mode, rollout_is_weights, global_num_tokens, global_num_seqs
    )
    pg_clipfrac = masked_mean((keep_gradient == 0).float(), response_mask)
    return pg_loss, metrics(pg_clipfrac, 0.0, approx_kl(log_ratio, response_mask))


@register_policy_loss("kl_cov")
def compute_policy_loss_kl_cov(
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
    """KL-Cov (eq. 12): unclipped ``L = -A r``; on the top ``kl_cov_ratio`` fraction (at least one) of valid
    tokens by covariance, ``L = -A r + ppo_kl_coef * |log_prob - old_log_prob|``.

    ``config.policy_loss``: ``kl_cov_ratio`` (default 0.0002), ``ppo_kl_coef`` (0.1). ``ppo_kl`` reports the
    mean ``|log_prob - old_log_prob|``.
    """
    config = require_config(config, "kl_cov")
    kl_cov_ratio = config.policy_loss.kl_cov_ratio
    ppo_kl_coef = config.policy_loss.ppo_kl_coef
    log_ratio, ratio = log_ratio_and_ratio(log_prob, old_log_prob)
    abs_log_ratio = log_ratio.abs()

    pg_losses = -advantages * ratio
    valid = response_mask > 0
    num_valid = int(valid.sum().item())
    if num_valid > 0 and kl_cov_ratio > 0:
        valid_positions = torch.nonzero(valid)
        valid_adv = advantages[valid].detach()
        valid_log_prob = log_prob[valid].detach()
        covariance = (valid_adv - valid_adv.mean()) * (valid_log_prob - valid_log_prob.mean())
        num_penalised = max(1, int(num_valid * kl_cov_ratio))
        top = valid_positions[torch.topk(covariance, num_penalised, largest=True).indices]
        penalty = torch.zeros_like(pg_losses)
        penalty[top[:, 0], top[:, 1]] = 1.0
        pg_losses = pg_losses + penalty * ppo_kl_coef * abs_log_ratio

    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, loss_agg_mode, rollout_is_weights, global_num_tokens, global_num_seqs
    )
    return pg_loss, metrics(0.0, 0.0, masked_mean(abs_log_ratio.detach(), response_mask))
