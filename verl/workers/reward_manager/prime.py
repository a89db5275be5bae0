"""The PRIME reward manager: scoring in a pool of processes with a per-sample timeout.

A scorer that hangs past ``timeout`` seconds, raises, kills its process or returns something that is
not a finite number (or a dict with a finite ``score``) gives that sample a reward of 0. The batch's
``reward_extra_info`` then carries per-sample 0/1 flags ``score_timeout``, ``score_error`` (raised or
crashed) and ``score_invalid``, and ``last_failure_counts`` their totals, so a trainer can log them.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import (
    AbstractRewardManager,
    collect_extra_info,
    decode_batch,
    is_valid_score,
    place_scores,
    split_score,
)
from verl.workers.reward_manager.registry import register
from verl.workers.reward_manager.scoring_pool import ScoringPool

FAILURE_KEYS = ("score_timeout", "score_error", "score_invalid")


@register("prime")
class PrimeRewardManager(AbstractRewardManager):
    """Process-pool scoring: ``num_processes`` workers, ``timeout`` seconds per sample."""

    def __init__(
        self,
        tokenizer,
        num_examine: int,
        compute_score=None,
        reward_fn_key: str = "data_source",
        num_processes: int | None = None,
        timeout: float = 300.0,
        mp_start_method: str = "fork",
    ):
        super().__init__(tokenizer, num_examine, compute_score, reward_fn_key)
        self.pool = ScoringPool(
            self.compute_score, num_processes or min(8, os.cpu_count() or 1), timeout, start_method=mp_start_method
        )
        self.last_failure_counts = dict.fromkeys(FAILURE_KEYS, 0)

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        outcomes = self.pool.score(
            [
                {
                    "data_source": s.data_source,
                    "solution_str": s.solution_str,
                    "ground_truth": s.ground_truth,
                    "extra_info": s.extra_info,
                }
                for s in samples
            ]
        )
        scores, extras, failures = [], [], []
        for outcome in outcomes:
            flags = dict.fromkeys(FAILURE_KEYS, 0.0)
            if outcome.status == "timeout":
                flags["score_timeout"] = 1.0
            elif outcome.status in ("error", "crash"):
                flags["score_error"] = 1.0
            elif not is_valid_score(outcome.value):
                flags["score_invalid"] = 1.0
            if any(flags.values()):
                score, extra = 0.0, {}
            else:
                score, extra = split_score(outcome.value)
            scores.append(score)
            extras.append(extra)
            failures.append(flags)
        extra_info = collect_extra_info(extras)
        for key, values in extra_info.items():  # failed samples carry no metrics of their own: count them as 0
            extra_info[key] = [0.0 if value is None else value for value in values]
        for key in FAILURE_KEYS:
            extra_info[key] = [flags[key] for flags in failures]
        self.last_failure_counts = {key: int(sum(extra_info[key])) for key in FAILURE_KEYS}
        self.print_examples(samples, scores)
        return self.finish(data, place_scores(data, samples, scores), extra_info, return_dict)

    def close(self) -> None:
        """Stop the scoring processes."""
        self.pool.close()
