"""The PRIME reward manager: the naive manager's per-sample calls plus per-sample failure flags.

Like every manager it scores in the scoring processes under ``reward_model.scoring`` (time limit, ``on_error``).
With ``on_error=fallback`` (verl's PRIME behaviour: a failed sample scores 0) the batch's ``reward_extra_info`` also
carries per-sample 0/1 flags ``score_timeout``, ``score_error`` (raised or crashed) and ``score_invalid`` (a result
that is not a finite number), and ``last_failure_counts`` their totals.
"""

from __future__ import annotations

from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import AbstractRewardManager, decode_batch, place_scores
from verl.workers.reward_manager.registry import register

FAILURE_FLAGS = {"timeout": "score_timeout", "error": "score_error", "invalid": "score_invalid"}
"""Scoring status -> the per-sample flag in ``reward_extra_info``."""


@register("prime")
class PrimeRewardManager(AbstractRewardManager):
    """Per-sample scoring in the scoring processes, with per-sample failure flags in the extra info."""

    def __init__(
        self,
        tokenizer,
        num_examine: int,
        compute_score=None,
        reward_fn_key: str = "data_source",
        scoring: Any = None,
    ):
        super().__init__(tokenizer, num_examine, compute_score, reward_fn_key, scoring)
        self.last_failure_counts = dict.fromkeys(FAILURE_FLAGS.values(), 0)

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        result = self.scorer.score_each(samples)
        extra_info = result.extra_info()
        for status, flag in FAILURE_FLAGS.items():
            extra_info[flag] = [float(s == status) for s in result.statuses]
        self.last_failure_counts = {flag: int(sum(extra_info[flag])) for flag in FAILURE_FLAGS.values()}
        self.print_examples(samples, result.scores)
        reward_tensor = place_scores(data, samples, result.scores)
        return self.finish(data, reward_tensor, extra_info, return_dict, result.metrics)
