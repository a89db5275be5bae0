"""SPIN's loss (Chen et al., 2024, "Self-Play Fine-Tuning Converts Weak Language Models to Strong Language Models",
arXiv:2401.01335): a DPO-style logistic loss whose "chosen" response is the SFT target y and whose "rejected" one is
the model's own sample y' (eq. 4.7, with ℓ the logistic loss and λ = ``dpo_beta``)::

    L = ℓ( λ [log p_θ(y|x) - log p_θt(y|x)] - λ [log p_θ(y'|x) - log p_θt(y'|x)] ),   ℓ(t) = log(1 + e^{-t})

``p_θt`` is the previous iteration's model (the reference, refreshed every ``trainer.ref_update_freq`` steps).
``sigmoid`` is that loss (optionally label-smoothed, conservative DPO); ``ipo`` the squared loss of IPO
(Azar et al., arXiv:2310.12036): ``(h - 1/(2λ))²`` with h the log-ratio difference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DPO_LOSS_TYPES = ("sigmoid", "ipo")

__all__ = ["DPO_LOSS_TYPES", "compute_online_dpo_loss", "sequence_log_probs"]


def sequence_log_probs(log_probs: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``(bs,)`` log-probability of each whole response: the masked sum of its token log-probs ``(bs, R)``."""
    return (log_probs * response_mask).sum(-1)


def compute_online_dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    reference_chosen_logps: torch.Tensor,
    reference_rejected_logps: torch.Tensor,
    beta: float,
    label_smoothing: float = 0.0,
    loss_type: str = "sigmoid",
) -> torch.Tensor:
    """Per-pair losses ``(pairs,)`` from sequence log-probs (verl's name and arguments).

    With ``h = (π_c - ref_c) - (π_r - ref_r)``: ``sigmoid`` gives ``-(1-ε) log σ(β h) - ε log σ(-β h)``;
    ``ipo`` gives ``(h - 1/(2β))²``.
    """
    logits = (policy_chosen_logps - reference_chosen_logps) - (policy_rejected_logps - reference_rejected_logps)
    if loss_type == "sigmoid":
        return -F.logsigmoid(beta * logits) * (1 - label_smoothing) - F.logsigmoid(-beta * logits) * label_smoothing
    if loss_type == "ipo":
        return (logits - 1 / (2 * beta)) ** 2
    raise ValueError(f"algorithm.dpo_loss_type must be one of {DPO_LOSS_TYPES}, got {loss_type!r}")
