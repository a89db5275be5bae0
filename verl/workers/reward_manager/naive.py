"""The naive reward manager: one ``compute_score`` call per sample (in the scoring processes, under
``reward_model.scoring``)."""

from __future__ import annotations

from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import AbstractRewardManager, decode_batch, place_scores
from verl.workers.reward_manager.registry import register


@register("naive")
class NaiveRewardManager(AbstractRewardManager):
    """Scores each sample with ``compute_score(data_source, solution_str, ground_truth, extra_info)``."""

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        result = self.scorer.score_each(samples)
        self.print_examples(samples, result.scores)
        reward_tensor = place_scores(data, samples, result.scores)
        return self.finish(data, reward_tensor, result.extra_info(), return_dict, result.metrics)
