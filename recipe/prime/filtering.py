"""PRIME's prompt selection: draw ``oversample_factor`` times the prompts, keep ``train_batch_size`` of them,
those whose responses pass the filters first (verl's ``filter_and_downsample``)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["select_prompt_rows"]


def select_prompt_rows(
    acc: np.ndarray, response_lengths: np.ndarray, uids: np.ndarray, keep_prompts: int, data_config: Any
) -> tuple[np.ndarray, dict[str, float]]:
    """Row indices of the ``keep_prompts`` prompts to train on, and the filter's metrics.

    A prompt (all rows sharing a ``uid``) passes when its mean ``acc`` lies in ``[accuracy_lower_bound,
    accuracy_upper_bound]`` (with ``filter_accuracy``) and, with ``filter_truncate``, none of its responses reached
    ``max_response_length - 1`` tokens. Passing prompts come first, then the others, each in draw order.
    """
    order, seen = [], {}
    for row, uid in enumerate(uids):
        if uid not in seen:
            seen[uid] = []
            order.append(uid)
        seen[uid].append(row)
    passing = []
    for uid in order:
        rows = seen[uid]
        ok = True
        if data_config.filter_accuracy:
            mean_acc = float(np.mean(acc[rows]))
            ok = data_config.accuracy_lower_bound <= mean_acc <= data_config.accuracy_upper_bound
        if data_config.filter_truncate:
            ok = ok and int(np.max(response_lengths[rows])) < data_config.max_response_length - 1
        passing.append(ok)
    if keep_prompts > len(order):
        raise ValueError(f"cannot keep {keep_prompts} prompts out of the {len(order)} drawn")
    ranked = [uid for uid, ok in zip(order, passing) if ok] + [uid for uid, ok in zip(order, passing) if not ok]
    rows = np.array([row for uid in ranked[:keep_prompts] for row in seen[uid]], dtype=np.int64)
    metrics = {
        "prime/filter_pass_rate": float(np.mean(passing)),
        "prime/kept_passing_prompts": float(min(sum(passing), keep_prompts)),
    }
    return rows, metrics
