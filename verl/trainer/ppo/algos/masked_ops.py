"""Masked reductions and group bookkeeping shared by the algorithm modules.

Kept local to the algorithm package so that every estimator and loss has the same, guarded
behaviour on empty masks (no division by zero, no NaN).
"""

from __future__ import annotations

import numpy as np
import torch


def masked_sum(values: torch.Tensor, mask: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """``sum(values * mask)`` over ``axis`` (all elements when None)."""
    return (values * mask).sum() if axis is None else (values * mask).sum(dim=axis)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """``sum(values * mask) / max(sum(mask), 1)``; an empty mask gives 0, never NaN."""
    count = mask.sum() if axis is None else mask.sum(dim=axis)
    return masked_sum(values, mask, axis) / count.clamp(min=1)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of the masked entries, with Bessel's correction when ``unbiased``; 0 when fewer than 2 entries."""
    mean = masked_mean(values, mask)
    centered_sq = (values - mean) ** 2
    count = mask.sum()
    denominator = (count - 1) if unbiased else count
    return masked_sum(centered_sq, mask) / denominator.clamp(min=1)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """``(values - mean) / sqrt(var + 1e-8)`` with mean and unbiased var over the masked entries."""
    mean = masked_mean(values, mask)
    var = masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return whitened


def group_ids(index: np.ndarray | list, device: torch.device | None = None) -> tuple[torch.Tensor, int]:
    """Map arbitrary group labels (``uid`` strings, ints) to dense ids ``0..G-1``.

    Returns ``(ids (bs,), num_groups)``.
    """
    labels = np.asarray(index, dtype=object) if not isinstance(index, np.ndarray) else index
    _, inverse = np.unique(labels.astype(str) if labels.dtype == object else labels, return_inverse=True)
    ids = torch.as_tensor(inverse.reshape(-1), dtype=torch.long, device=device)
    num_groups = int(ids.max().item()) + 1 if ids.numel() else 0
    return ids, num_groups


def group_mean_std(scores: torch.Tensor, index: np.ndarray | list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample group mean, unbiased group std and group size for ``scores (bs,)`` grouped by ``index``.

    A group of one has mean 0 and std 1 (so its advantage is its own score), as in verl.
    """
    ids, num_groups = group_ids(index, scores.device)
    dtype = scores.dtype
    counts = torch.zeros(num_groups, dtype=dtype, device=scores.device).index_add_(0, ids, torch.ones_like(scores))
    sums = torch.zeros(num_groups, dtype=dtype, device=scores.device).index_add_(0, ids, scores)
    means = sums / counts.clamp(min=1)
    sq_dev = (scores - means[ids]) ** 2
    sq_sums = torch.zeros(num_groups, dtype=dtype, device=scores.device).index_add_(0, ids, sq_dev)
    stds = torch.sqrt(sq_sums / (counts - 1).clamp(min=1))
    singleton = counts <= 1
    means = torch.where(singleton, torch.zeros_like(means), means)
    stds = torch.where(singleton, torch.ones_like(stds), stds)
    return means[ids], stds[ids], counts[ids]
