"""The DAPO reward manager: naive scoring plus the overlong-response penalty of DAPO (Yu et al., 2025, §3.4).

With ``overlong_buffer_cfg = {enable, len, penalty_factor, log}`` and ``max_resp_len`` L, a response of
``l`` tokens gets, on top of its score,

    overlong_reward = min(-(l - (L - len)) / len * penalty_factor, 0)

so the penalty grows linearly from 0 at ``L - len`` tokens to ``-penalty_factor`` at ``L``.
"""

from __future__ import annotations

from typing import Any

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import AbstractRewardManager, decode_batch, place_scores
from verl.workers.reward_manager.registry import register


def _cfg_value(cfg: Any, key: str, default: Any) -> Any:
    if cfg is None:
        return default
    if isinstance(cfg, dict):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


@register("dapo")
class DAPORewardManager(AbstractRewardManager):
    """Naive scoring with DAPO's soft overlong punishment (``overlong_buffer_cfg``, ``max_resp_len``)."""

    def __init__(
        self,
        tokenizer,
        num_examine: int,
        compute_score=None,
        reward_fn_key: str = "data_source",
        max_resp_len: int | None = None,
        overlong_buffer_cfg: Any = None,
        scoring: Any = None,
    ):
        super().__init__(tokenizer, num_examine, compute_score, reward_fn_key, scoring)
        self.overlong_enabled = bool(_cfg_value(overlong_buffer_cfg, "enable", False))
        self.buffer_len = int(_cfg_value(overlong_buffer_cfg, "len", 0))
        self.penalty_factor = float(_cfg_value(overlong_buffer_cfg, "penalty_factor", 1.0))
        self.log_overlong = bool(_cfg_value(overlong_buffer_cfg, "log", False))
        self.max_resp_len = max_resp_len
        if self.overlong_enabled:
            if max_resp_len is None:
                raise ValueError(
                    "reward_model.reward_kwargs.max_resp_len must be set when overlong_buffer_cfg.enable is true"
                )
            if not 0 < self.buffer_len <= max_resp_len:
                raise ValueError(f"overlong_buffer_cfg.len must be in (0, max_resp_len={max_resp_len}]")

    def overlong_reward(self, valid_response_length: int) -> float:
        """``min(-(l - (L - len)) / len * penalty_factor, 0)`` for a response of ``l`` tokens."""
        expected_length = self.max_resp_len - self.buffer_len
        exceed_length = valid_response_length - expected_length
        return min(-exceed_length / self.buffer_len * self.penalty_factor, 0.0)

    def __call__(self, data: DataProto, return_dict: bool = False) -> torch.Tensor | dict[str, Any]:
        precomputed = self.precomputed(data, return_dict)
        if precomputed is not None:
            return precomputed
        samples = decode_batch(data, self.tokenizer, self.reward_fn_key)
        result = self.scorer.score_each(samples)
        scores = list(result.scores)
        extra_info = result.extra_info()
        if self.overlong_enabled:
            penalties = [self.overlong_reward(sample.valid_response_length) for sample in samples]
            scores = [score + penalty for score, penalty in zip(scores, penalties)]
            if self.log_overlong:
                extra_info["overlong_reward"] = penalties
                extra_info["overlong"] = [penalty < 0 for penalty in penalties]
        self.print_examples(samples, scores)
        reward_tensor = place_scores(data, samples, scores)
        return self.finish(data, reward_tensor, extra_info, return_dict, result.metrics)
