"""Training-inference mismatch correction (``algorithm.rollout_correction``).

The rollout engine samples from ``pi_rollout`` (its log-probs: ``rollout_log_probs``), the trainer
recomputes ``pi_old`` (``old_log_probs``); kernels, precision and batching make them differ. With the
per-token ratio ``rho_t = pi_old / pi_rollout = exp(old_log_probs - rollout_log_probs)``
(Liu, Li et al., "When Speed Kills Stability", 2025; Yao et al., "Off-policy RL" / TIS, 2025):

* importance sampling (``rollout_is``): ``token`` weights ``rho_t``; ``sequence`` weights
  ``prod_t rho_t`` broadcast over the sequence. Weights are bounded to ``[e^-20, e^20]``, truncated above
  at ``rollout_is_threshold`` (TIS), optionally normalised to batch mean 1 (``rollout_is_batch_normalize``),
  and zero on padding. They multiply the policy loss (``rollout_is_weights``).
* rejection sampling (``rollout_rs``): ``token`` masks tokens with ``rho_t`` outside
  ``[rollout_rs_threshold_lower, rollout_rs_threshold]``; ``sequence`` masks sequences whose ``prod rho_t``
  is outside; ``geometric`` uses the geometric mean ``exp(mean_t log rho_t)``. The upper threshold defaults
  to ``rollout_is_threshold``, the lower one to its reciprocal.
* veto (``rollout_token_veto_threshold``): a sequence with any ``rho_t`` below it is masked.

Config keys (verl's; defaults in brackets): ``rollout_is`` [None], ``rollout_is_threshold`` [2.0],
``rollout_is_batch_normalize`` [False], ``rollout_rs`` [None], ``rollout_rs_threshold`` [None],
``rollout_rs_threshold_lower`` [None], ``rollout_token_veto_threshold`` [None].
Metrics (all under ``rollout_corr/``) are listed in :func:`compute_offpolicy_metrics` and
:func:`compute_rollout_correction_and_rejection_mask`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from omegaconf import DictConfig

from verl.trainer.config.algorithm import RolloutCorrectionConfig
from verl.utils.config import as_typed_config

from .masked_ops import masked_mean

SAFETY_LOG_BOUND = 20.0
IS_LEVELS = ("token", "sequence")
RS_LEVELS = ("token", "sequence", "geometric")


def compute_offpolicy_metrics(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> dict[str, float]:
    """Mismatch diagnostics between the rollout engine and the trainer over the valid tokens.

    ``kl`` = mean(rollout_log_prob - old_log_prob) (k1 estimate of KL(pi_rollout || pi_old));
    ``k3_kl`` = mean(rho - 1 - log rho) (non-negative); ``mean_abs_log_ratio`` = ``mean |old - rollout|``;
    ``training_ppl`` / ``rollout_ppl`` = mean over sequences of exp(-token-mean log-prob);
    ``chi2_token`` = mean(rho^2) - 1.
    """
    mask = response_mask.to(old_log_prob.dtype)
    log_ratio = torch.clamp(old_log_prob - rollout_log_prob, -SAFETY_LOG_BOUND, SAFETY_LOG_BOUND) * mask
    ratio = torch.exp(log_ratio)
    non_empty = mask.sum(dim=-1) > 0

    def seq_ppl(log_prob: torch.Tensor) -> float:
        per_seq = torch.exp(-masked_mean(log_prob, mask, axis=-1))
        return float(per_seq[non_empty].mean().item()) if non_empty.any() else 0.0

    return {
        "rollout_corr/kl": float(masked_mean(-log_ratio, mask).item()),
        "rollout_corr/k3_kl": float(masked_mean(ratio - 1 - log_ratio, mask).item()),
        "rollout_corr/mean_abs_log_ratio": float(masked_mean(log_ratio.abs(), mask).item()),
        "rollout_corr/training_ppl": seq_ppl(old_log_prob),
        "rollout_corr/rollout_ppl": seq_ppl(rollout_log_prob),
        "rollout_corr/chi2_token": float((masked_mean(ratio**2, mask) - 1).item()),
    }


def _is_weights(
    log_ratio: torch.Tensor, mask: torch.Tensor, level: str, threshold: float, batch_normalize: bool
) -> tuple[torch.Tensor, dict[str, float]]:
    if level == "token":
        bounded = torch.exp(torch.clamp(log_ratio, -SAFETY_LOG_BOUND, SAFETY_LOG_BOUND))
        unit_weights, unit_mask = bounded, mask
    else:
        seq_log_ratio = torch.clamp((log_ratio * mask).sum(dim=-1), -SAFETY_LOG_BOUND, SAFETY_LOG_BOUND)
        unit_weights = torch.exp(seq_log_ratio)
        unit_mask = (mask.sum(dim=-1) > 0).to(mask.dtype)
    truncated = unit_weights.clamp(max=threshold)
    clipped_fraction = masked_mean((unit_weights > threshold).to(mask.dtype), unit_mask)
    if batch_normalize:
        truncated = truncated / masked_mean(truncated, unit_mask).clamp(min=1e-8)
    # Effective sample size (Kong, 1992) normalised to (0, 1]: (sum w)^2 / (n * sum w^2).
    count = unit_mask.sum().clamp(min=1)
    weight_sum = (truncated * unit_mask).sum()
    ess = weight_sum**2 / (count * (truncated**2 * unit_mask).sum()).clamp(min=1e-12)
    valid_weights = truncated[unit_mask > 0]
    metrics = {
        "rollout_corr/is_weight_mean": float(masked_mean(truncated, unit_mask).item()),
        "rollout_corr/is_weight_max": float(valid_weights.max().item()) if valid_weights.numel() else 0.0,
        "rollout_corr/is_weight_min": float(valid_weights.min().item()) if valid_weights.numel() else 0.0,
        "rollout_corr/is_ess": float(ess.item()) if valid_weights.numel() else 0.0,
        "rollout_corr/is_clipped_frac": float(clipped_fraction.item()),
    }
    token_weights = truncated if level == "token" else truncated.unsqueeze(-1).expand_as(mask)
    return token_weights * mask, metrics


def _rejection_mask(
    log_ratio: torch.Tensor, mask: torch.Tensor, level: str, upper: float, lower: float
) -> torch.Tensor:
    log_upper, log_lower = math.log(upper), math.log(lower)
    if level == "token":
        statistic = torch.clamp(log_ratio, -SAFETY_LOG_BOUND, SAFETY_LOG_BOUND)
        return ((statistic <= log_upper) & (statistic >= log_lower)).to(mask.dtype)
    seq_log_ratio = (log_ratio * mask).sum(dim=-1)
    if level == "geometric":
        seq_log_ratio = seq_log_ratio / mask.sum(dim=-1).clamp(min=1)
    statistic = torch.clamp(seq_log_ratio, -SAFETY_LOG_BOUND, SAFETY_LOG_BOUND)
    keep = (statistic <= log_upper) & (statistic >= log_lower)
    return keep.to(mask.dtype).unsqueeze(-1).expand_as(mask)


def compute_rollout_correction_and_rejection_mask(
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is: str | None = None,
    rollout_is_threshold: float = 2.0,
    rollout_is_batch_normalize: bool = False,
    rollout_rs: str | None = None,
    rollout_rs_threshold: float | None = None,
    rollout_rs_threshold_lower: float | None = None,
    rollout_token_veto_threshold: float | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor, dict[str, float]]:
    """IS weights and rejection mask from ``old_log_prob``, ``rollout_log_prob``, ``response_mask`` (all ``(bs, R)``).

    Returns:
        ``(rollout_is_weights (bs, R) or None when rollout_is is None, modified_response_mask (bs, R), metrics)``.
        Metrics: the off-policy diagnostics plus ``is_weight_mean/max/min``, ``is_ess``, ``is_clipped_frac`` (IS),
        ``rs_masked_frac`` (tokens), ``rs_seq_masked_frac`` (sequences losing any token), ``veto_frac``.
    """
    if rollout_is is not None and rollout_is not in IS_LEVELS:
        raise ValueError(f"algorithm.rollout_correction.rollout_is={rollout_is!r}; choose one of {IS_LEVELS} or null")
    if rollout_rs is not None and rollout_rs not in RS_LEVELS:
        raise ValueError(f"algorithm.rollout_correction.rollout_rs={rollout_rs!r}; choose one of {RS_LEVELS} or null")
    if rollout_is_threshold is None or rollout_is_threshold <= 0:
        raise ValueError(f"algorithm.rollout_correction.rollout_is_threshold must be > 0, got {rollout_is_threshold}")
    mask = response_mask.to(old_log_prob.dtype)
    log_ratio = (old_log_prob - rollout_log_prob).detach()
    metrics = compute_offpolicy_metrics(old_log_prob.detach(), rollout_log_prob, mask)

    weights = None
    if rollout_is is not None:
        weights, is_metrics = _is_weights(log_ratio, mask, rollout_is, rollout_is_threshold, rollout_is_batch_normalize)
        metrics.update(is_metrics)

    keep = torch.ones_like(mask)
    if rollout_rs is not None:
        upper = rollout_is_threshold if rollout_rs_threshold is None else rollout_rs_threshold
        lower = 1.0 / upper if rollout_rs_threshold_lower is None else rollout_rs_threshold_lower
        if not 0 < lower <= upper:
            raise ValueError(
                f"algorithm.rollout_correction: need 0 < rollout_rs_threshold_lower ({lower}) <= "
                f"rollout_rs_threshold ({upper})"
            )
        keep = keep * _rejection_mask(log_ratio, mask, rollout_rs, upper, lower)
    if rollout_token_veto_threshold is not None:
        catastrophic = (log_ratio < math.log(rollout_token_veto_threshold)) & (mask > 0)
        vetoed = catastrophic.any(dim=-1)
        keep = keep * (~vetoed).to(mask.dtype).unsqueeze(-1)
        non_empty = mask.sum(dim=-1) > 0
        metrics["rollout_corr/veto_frac"] = float(vetoed[non_empty].float().mean().item()) if non_empty.any() else 0.0

    modified_mask = mask * keep
    dropped = mask - modified_mask
    non_empty = mask.sum(dim=-1) > 0
    metrics["rollout_corr/rs_masked_frac"] = float(masked_mean(dropped, mask).item())
    seq_dropped = dropped.sum(dim=-1) > 0
    metrics["rollout_corr/rs_seq_masked_frac"] = (
        float(seq_dropped[non_empty].float().mean().item()) if non_empty.any() else 0.0
    )
    return weights, modified_mask.to(response_mask.dtype), metrics


def compute_rollout_correction_and_add_to_batch(
    data: Any, rollout_corr_config: RolloutCorrectionConfig | DictConfig | dict
) -> tuple[Any, dict[str, float]]:
    """Apply ``algorithm.rollout_correction`` to a batch holding ``old_log_probs``, ``rollout_log_probs`` and
    ``response_mask``: stores ``batch['rollout_is_weights']`` (when ``rollout_is`` is set) and replaces
    ``batch['response_mask']`` by the rejection-masked one. Returns ``(data, metrics)``."""
    config = as_typed_config(rollout_corr_config, RolloutCorrectionConfig, "algorithm.rollout_correction")
    for key in ("old_log_probs", "rollout_log_probs", "response_mask"):
        if key not in data.batch.keys():
            hint = " (set actor_rollout_ref.rollout.calculate_log_probs=True)" if key == "rollout_log_probs" else ""
            raise KeyError(f"rollout correction needs batch[{key!r}]{hint}")
    weights, modified_mask, metrics = compute_rollout_correction_and_rejection_mask(
        old_log_prob=data.batch["old_log_probs"],
        rollout_log_prob=data.batch["rollout_log_probs"],
        response_mask=data.batch["response_mask"],
        rollout_is=config.rollout_is,
        rollout_is_threshold=config.rollout_is_threshold,
        rollout_is_batch_normalize=config.rollout_is_batch_normalize,
        rollout_rs=config.rollout_rs,
        rollout_rs_threshold=config.rollout_rs_threshold,
        rollout_rs_threshold_lower=config.rollout_rs_threshold_lower,
        rollout_token_veto_threshold=config.rollout_token_veto_threshold,
    )
    if weights is not None:
        data.batch["rollout_is_weights"] = weights
    data.batch["response_mask"] = modified_mask
    return data, metrics
