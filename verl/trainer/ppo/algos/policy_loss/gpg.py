"""Group Policy Gradient loss: plain REINFORCE on the (group-normalised) advantage, no ratio or clip."""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_policy_loss
from .common import approx_kl, metrics, reduce_policy_loss


@register_policy_loss("gpg")
def compute_policy_loss_gpg(
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
    """GPG (Chu et al., arXiv:2504.02546, eq. 7): ``L = -A log pi(y_t)``; needs no config."""
    pg_losses = -log_prob * advantages
    pg_loss = reduce_policy_loss(
        pg_losses, response_mask, loss_agg_mode, rollout_is_weights, global_num_tokens, global_num_seqs
    )
    return pg_loss, metrics(0.0, 0.0, approx_kl(log_prob - old_log_prob, response_mask))
