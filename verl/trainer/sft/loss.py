"""The SFT objective: negative log-likelihood of the target tokens, normalised so that summing the per-micro-batch
losses over micro-batches and ranks gives the loss of the whole global batch."""

from __future__ import annotations

import torch


def next_token_target_mask(loss_mask: torch.Tensor) -> torch.Tensor:
    """Shift a token-aligned ``loss_mask (bs, S)`` onto predicting positions: ``out[:, t] = loss_mask[:, t + 1]``
    (the logits at ``t`` predict token ``t + 1``); the last column is 0."""
    shifted = torch.zeros_like(loss_mask)
    shifted[:, :-1] = loss_mask[:, 1:]
    return shifted


def sft_nll_sum(log_probs: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """``-sum_{b,t} log p(x_{b,t+1} | x_{b,<=t}) * m_{b,t+1}`` for next-token ``log_probs (bs, S)`` (as returned by
    ``verl.workers.engine.fsdp.forward.forward_log_probs``) and the token-aligned ``loss_mask (bs, S)``."""
    target = next_token_target_mask(loss_mask).to(log_probs.dtype)
    return -(log_probs * target).sum()


def loss_normalizer(local_tokens: float, global_tokens: float, dp_size: int, balance_dp_token: bool) -> float:
    """Divisor of each micro-batch's NLL sum.

    ``balance_dp_token``: ``global_tokens`` (token mean over the whole global batch). Otherwise
    ``local_tokens * dp_size``: each rank's own token mean, averaged over ranks (verl's default).
    """
    denominator = global_tokens if balance_dp_token else local_tokens * dp_size
    return max(float(denominator), 1.0)
