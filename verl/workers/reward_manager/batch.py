"""The batch reward manager: one ``compute_score`` call for the whole batch (e.g. a remote verifier)."""

from __future__ import annotations

from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import AbstractRewardManager, decode_batch, place_scores
from verl.workers.reward_manager.registry import register


def _score_one_by_one(data_sources, solution_strs, ground_truths, extra_infos, **kwargs) -> list:
    from verl.utils.reward_score import default_compute_score

    return [
        default_compute_score(source, solution, truth, extra)
        for source, solution, truth, extra in zip(data_sources, solution_strs, ground_truths, extra_infos)
    ]


@register("batch")
class BatchRewardManager(AbstractRewardManager):
    """Calls ``compute_score(data_sources, solution_strs, ground_truths, extra_infos, **reward_kwargs)`` once.

    The function returns one score (float or dict with ``score``) per sample, in order. The time limit of
    ``reward_model.scoring.timeout`` applies to this one call.
    """

    def __init__(
        self,
        tokenizer,
        num_examine: int,
        compute_score=None,
        reward_fn_key: str = "data_source",
        scoring: Any = None,
        **kwargs,
    ):
        super().__init__(tokenizer, num_examine, compute_score or _score_one_by_one, reward_fn_key, scoring)
        self.reward_kwargs = kwargs

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        result = self.scorer.score_batch(samples, **self.reward_kwargs)
        self.print_examples(samples, result.scores)
        reward_tensor = place_scores(data, samples, result.scores)
        return self.finish(data, reward_tensor, result.extra_info(), return_dict, result.metrics)
