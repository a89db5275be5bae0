"""Token-level distillation losses on the teacher's top-k support (GKD: Agarwal et al., 2024, "On-Policy
Distillation of Language Models: Learning from Self-Generated Mistakes", arXiv:2306.13649).

At every response position the teacher sends its k most likely tokens and their log-probs. Both distributions
are renormalised over those k tokens: ``P`` (teacher) from its top-k log-probs, ``Q`` (student) from the student's
log-probs of the same tokens. With ``k`` = the vocabulary size this is the exact full-vocabulary divergence.

- ``forward_kl``: ``KL(P || Q) = Σ_v P(v) (log P(v) - log Q(v))`` (mode covering);
- ``reverse_kl``: ``KL(Q || P) = Σ_v Q(v) (log Q(v) - log P(v))`` (mode seeking, the on-policy distillation loss);
- ``jsd``: GKD's generalized Jensen-Shannon divergence (eq. 2) with ``M = β P + (1 - β) Q``:
  ``β KL(P || M) + (1 - β) KL(Q || M)``; ``β = 0`` gives ``forward_kl`` and ``β = 1`` ``reverse_kl`` (the limits of
  the β-scaled JSD, as in TRL's ``generalized_jsd_loss``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from verl.utils.registry import Registry

DISTILL_LOSS_REGISTRY: Registry[Callable[..., torch.Tensor]] = Registry(
    "distillation loss",
    "actor_rollout_ref.actor.distill.loss_type",
    package="recipe.gkd.distill_losses",
    decorator="register_distill_loss",
)

__all__ = [
    "DISTILL_LOSS_REGISTRY",
    "forward_kl",
    "generalized_jsd",
    "renormalize",
    "reverse_kl",
    "token_distill_loss",
]


def register_distill_loss(name: str):
    return DISTILL_LOSS_REGISTRY.register(name)


def renormalize(log_probs: torch.Tensor) -> torch.Tensor:
    """Log-probs ``(..., k)`` renormalised to sum to one over the last dimension."""
    return log_probs - torch.logsumexp(log_probs, dim=-1, keepdim=True)


def _kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """``Σ_v p(v) (log p(v) - log q(v))`` over the last dimension (0 · log 0 = 0)."""
    p = log_p.exp()
    return torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1)


@register_distill_loss("forward_kl")
def forward_kl(teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """``KL(P || Q)`` per position; inputs ``(..., k)`` normalised log-probs; returns ``(...)``."""
    return _kl(teacher_log_probs, student_log_probs)


@register_distill_loss("reverse_kl")
def reverse_kl(teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """``KL(Q || P)`` per position; inputs ``(..., k)`` normalised log-probs; returns ``(...)``."""
    return _kl(student_log_probs, teacher_log_probs)


@register_distill_loss("jsd")
def generalized_jsd(
    teacher_log_probs: torch.Tensor, student_log_probs: torch.Tensor, beta: float = 0.5
) -> torch.Tensor:
    """GKD's ``JSD(β) = β KL(P || M) + (1 - β) KL(Q || M)``, ``M = β P + (1 - β) Q``; the KL limits at β = 0, 1."""
    if beta <= 0.0:
        return forward_kl(teacher_log_probs, student_log_probs)
    if beta >= 1.0:
        return reverse_kl(teacher_log_probs, student_log_probs)
    mixture = torch.logsumexp(
        torch.stack([teacher_log_probs + math.log(beta), student_log_probs + math.log(1.0 - beta)]), dim=0
    )
    return beta * _kl(teacher_log_probs, mixture) + (1.0 - beta) * _kl(student_log_probs, mixture)


def token_distill_loss(
    loss_type: str,
    teacher_topk_log_probs: torch.Tensor,
    student_topk_log_probs: torch.Tensor,
    beta: float = 0.5,
) -> torch.Tensor:
    """The registered ``loss_type`` per position ``(bs, R)`` from ``(bs, R, k)`` teacher / student log-probs of the
    teacher's top-k tokens (renormalised over them here)."""
    loss_fn = DISTILL_LOSS_REGISTRY.get(loss_type)
    return loss_fn(renormalize(teacher_topk_log_probs.float()), renormalize(student_topk_log_probs.float()), beta)
