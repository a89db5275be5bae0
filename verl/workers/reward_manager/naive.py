"""The naive reward manager: one ``compute_score`` call per sample, in this process."""

from __future__ import annotations

from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import (
    AbstractRewardManager,
    collect_extra_info,
    decode_batch,
    place_scores,
    split_score,
)
from verl.workers.reward_manager.registry import register


@register("naive")
class NaiveRewardManager(AbstractRewardManager):
    """Scores each sample with ``compute_score(data_source, solution_str, ground_truth, extra_info)``."""

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        scores, extras = [], []
        for sample in samples:
            score, extra = split_score(
                self.compute_score(
                    data_source=sample.data_source,
                    solution_str=sample.solution_str,
                    ground_truth=sample.ground_truth,
                    extra_info=sample.extra_info,
                )
            )
            scores.append(score)
            extras.append(extra)
        self.print_examples(samples, scores)
        return self.finish(data, place_scores(data, samples, scores), collect_extra_info(extras), return_dict)
