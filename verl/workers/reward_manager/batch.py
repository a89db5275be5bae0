"""The batch reward manager: one ``compute_score`` call for the whole batch (e.g. a remote verifier)."""

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


def _score_one_by_one(data_sources, solution_strs, ground_truths, extra_infos, **kwargs) -> list:
    from verl.utils.reward_score import default_compute_score

    return [
        default_compute_score(source, solution, truth, extra)
        for source, solution, truth, extra in zip(data_sources, solution_strs, ground_truths, extra_infos)
    ]


@register("batch")
class BatchRewardManager(AbstractRewardManager):
    """Calls ``compute_score(data_sources, solution_strs, ground_truths, extra_infos, **reward_kwargs)`` once.

    The function returns one score (float or dict with ``score``) per sample, in order.
    """

    def __init__(self, tokenizer, num_examine: int, compute_score=None, reward_fn_key: str = "data_source", **kwargs):
        super().__init__(tokenizer, num_examine, compute_score or _score_one_by_one, reward_fn_key)
        self.reward_kwargs = kwargs

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        results = self.compute_score(
            data_sources=[s.data_source for s in samples],
            solution_strs=[s.solution_str for s in samples],
            ground_truths=[s.ground_truth for s in samples],
            extra_infos=[s.extra_info for s in samples],
            **self.reward_kwargs,
        )
        if len(results) != len(samples):
            raise ValueError(f"the batch reward function returned {len(results)} scores for {len(samples)} samples")
        split = [split_score(result) for result in results]
        scores, extras = [score for score, _ in split], [extra for _, extra in split]
        self.print_examples(samples, scores)
        return self.finish(data, place_scores(data, samples, scores), collect_extra_info(extras), return_dict)
