"""PRIME's algorithm pieces (Cui et al., 2025, "Process Reinforcement through Implicit Rewards", arXiv:2502.01456).

The implicit process reward model (PRM) is a causal LM π_φ trained only on outcome labels; its token rewards are
its log-ratio to a frozen reference, ``r_t = β (log π_φ(y_t | y_<t) - log π_ref(y_t | y_<t))`` (eq. 3). It is
trained online with a cross-entropy loss on the outcome (eq. 4) and its token rewards join the outcome rewards in a
leave-one-out (RLOO) advantage, each source with its own baseline (eq. 5-6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from verl.trainer.ppo.algos.masked_ops import group_ids
from verl.utils.registry import Registry
from verl.utils.torch_functional import masked_whiten

PRIME_ADV_ESTIMATOR_REGISTRY: Registry[Callable[..., Any]] = Registry(
    "PRIME advantage estimator",
    "algorithm.adv_estimator",
    package="recipe.prime.prime_core_algos",
    decorator="register",
)
"""PRIME's estimators by ``algorithm.adv_estimator`` name: they combine several reward sources."""

__all__ = [
    "PRIME_ADV_ESTIMATOR_REGISTRY",
    "batch_norm_scale",
    "compute_ce_dpo_loss_rm",
    "compute_dpo_accuracy",
    "compute_prime_rloo_advantage_return",
    "implicit_process_rewards",
    "last_token_mask",
    "masked_rloo",
]


def last_token_mask(response_mask: torch.Tensor) -> torch.Tensor:
    """``(bs, R)`` bool mask of each response's last valid token (all False for an empty response)."""
    lengths = response_mask.sum(-1).long()
    positions = torch.arange(response_mask.size(1), device=response_mask.device)
    return (positions[None, :] == (lengths - 1)[:, None]) & (lengths[:, None] > 0)


def implicit_process_rewards(
    q: torch.Tensor, response_mask: torch.Tensor, beta: float, granularity: str = "token"
) -> torch.Tensor:
    """Token rewards ``β q_t`` from the per-token log-ratio ``q (bs, R)``, as verl's recipe places them.

    ``token``: ``β q_t`` on every response token but the last (the outcome reward's slot); ``whole``: the sum
    ``β Σ_t q_t`` on the last token. Zero elsewhere.
    """
    q = q * response_mask
    last = last_token_mask(response_mask)
    if granularity == "token":
        return beta * q * (response_mask.bool() & ~last)
    if granularity == "whole":
        return beta * q.sum(-1, keepdim=True) * last
    raise ValueError(f"reward_model.prime_granularity must be 'token' or 'whole', got {granularity!r}")


def batch_norm_scale(token_level_scores: torch.Tensor) -> torch.Tensor:
    """PRIME's ``batch_norm``: the largest absolute return-to-go ``max_{i,t} |Σ_{t'>=t} r_{i,t'}|`` of the batch;
    the scores are divided by it (plus 1e-6)."""
    returns_to_go = token_level_scores.flip(dims=[1]).cumsum(dim=-1).flip(dims=[1])
    return returns_to_go.abs().max()


def compute_ce_dpo_loss_rm(
    q: torch.Tensor, acc: torch.Tensor, response_mask: torch.Tensor, beta: float
) -> torch.Tensor:
    """PRIME eq. 4: ``mean_i BCE(σ(β Σ_t q_{i,t}), acc_i)``, the implicit PRM's outcome loss.

    ``q (bs, R)``: log π_φ - log π_ref per response token; ``acc (bs,)`` in [0, 1].
    """
    logits = beta * (q * response_mask).sum(-1)
    return F.binary_cross_entropy_with_logits(logits, acc.to(logits.dtype))


def compute_dpo_accuracy(
    token_level_scores: torch.Tensor, acc: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray
) -> torch.Tensor:
    """How often the PRM ranks two responses of one prompt like their outcomes, weighted by ``|acc_i - acc_j|``.

    Per group: ``Σ_{i<j} |Δacc| · 1[(Δscore > 0) == (Δacc > 0)] / Σ_{i<j} |Δacc|`` (0.5 when all outcomes are
    equal), with ``score_i = Σ_t token_level_scores_{i,t}``; the mean over groups.
    """
    scores = (token_level_scores * response_mask).sum(-1)
    ids, num_groups = group_ids(index, scores.device)
    per_group = []
    for group in range(num_groups):
        members = (ids == group).nonzero(as_tuple=True)[0]
        upper = torch.triu(torch.ones(len(members), len(members), dtype=torch.bool, device=scores.device), 1)
        acc_diff = (acc[members][:, None] - acc[members][None, :])[upper]
        score_diff = (scores[members][:, None] - scores[members][None, :])[upper]
        weight = acc_diff.abs().sum()
        if weight == 0:
            per_group.append(torch.tensor(0.5, device=scores.device))
        else:
            agree = ((score_diff > 0) == (acc_diff > 0)).to(acc_diff.dtype)
            per_group.append((agree * acc_diff.abs()).sum() / weight)
    return torch.stack(per_group).mean()


def masked_rloo(rewards: torch.Tensor, mask: torch.Tensor, index: np.ndarray) -> torch.Tensor:
    """PRIME's leave-one-out baseline for one reward source, token by token.

    With ``m_j`` the mean of response j's masked rewards and n the group size, a masked reward becomes
    ``r_{i,t} · n/(n-1) - Σ_{j in group} m_j / (n-1)``; for one reward per response this is
    ``r_i - mean_{j≠i} r_j``. Unmasked positions are 0. Groups of one keep their rewards.
    """
    mask = mask.to(rewards.dtype)
    counts = mask.sum(-1)
    means = (rewards * mask).sum(-1) / counts.clamp(min=1)
    ids, num_groups = group_ids(index, rewards.device)
    sizes = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device).index_add_(
        0, ids, torch.ones_like(means)
    )[ids]
    sums = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device).index_add_(0, ids, means)[ids]
    scale = torch.where(sizes > 1, sizes / (sizes - 1).clamp(min=1), torch.ones_like(sizes))
    baseline = torch.where(sizes > 1, sums / (sizes - 1).clamp(min=1), torch.zeros_like(sums))
    return (rewards * scale[:, None] - baseline[:, None]) * mask


def register(name: str, **info: Any):
    return PRIME_ADV_ESTIMATOR_REGISTRY.register(name, **info)


@register("rloo")
def compute_prime_rloo_advantage_return(
    rm_scores: torch.Tensor | None,
    acc: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    reward_dpo_coef: float,
    reward_gt_coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PRIME eq. 5-6: leave-one-out per source, summed, returns-to-go, whitened.

    ``R_{i,t} = reward_dpo_coef · rloo(rm_scores)_{i,t} + reward_gt_coef · rloo(acc at the last token)_{i,t}``;
    ``returns_{i,t} = Σ_{t'>=t} R_{i,t'}``; ``advantages = whiten(returns)`` over the response tokens.
    ``rm_scores (bs, R)`` are the implicit token rewards (None without a PRM), ``acc (bs,)`` the outcomes.
    Returns ``(advantages, returns)``, both ``(bs, R)``.
    """
    with torch.no_grad():
        mask = response_mask.to(torch.float32)
        combined = torch.zeros_like(mask)
        if rm_scores is not None and reward_dpo_coef != 0:
            combined = combined + reward_dpo_coef * masked_rloo(rm_scores.float(), mask, index)
        if reward_gt_coef != 0:
            last = last_token_mask(response_mask)
            outcome = acc.float()[:, None] * last
            combined = combined + reward_gt_coef * masked_rloo(outcome, last, index)
        returns = (combined * mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
        advantages = masked_whiten(returns, mask) * mask
    return advantages, returns
