"""What every reward manager shares: decoding the valid tokens, placing scores, and printing examples.

A rollout batch holds left-padded ``prompts (bs, P)`` and right-padded ``responses (bs, R)``; the
``attention_mask (bs, P + R)`` marks valid tokens. A sequence-level score goes on the last valid
response token: ``token_level_scores[i, valid_response_length[i] - 1] = score[i]``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch

from verl.protocol import DataProto


@dataclass
class ScoringInput:
    """One sample as the scorer sees it."""

    data_source: str
    prompt_str: str
    solution_str: str
    ground_truth: Any
    extra_info: dict | None
    valid_response_length: int


def decode_batch(data: DataProto, tokenizer, reward_fn_key: str = "data_source") -> list[ScoringInput]:
    """Decode the valid prompt and response tokens of every sample, with its data source and ground truth."""
    prompts, responses = data.batch["prompts"], data.batch["responses"]
    prompt_length = prompts.shape[-1]
    attention_mask = data.batch["attention_mask"]
    valid_prompt_lengths = attention_mask[:, :prompt_length].sum(dim=-1).tolist()
    valid_response_lengths = attention_mask[:, prompt_length:].sum(dim=-1).tolist()
    if reward_fn_key not in data.non_tensor_batch:
        raise KeyError(
            f"The batch has no non-tensor key {reward_fn_key!r} (data.reward_fn_key); "
            f"it has {sorted(data.non_tensor_batch)}."
        )
    data_sources = data.non_tensor_batch[reward_fn_key]
    reward_models = data.non_tensor_batch.get("reward_model")
    extra_infos = data.non_tensor_batch.get("extra_info")
    samples = []
    for i in range(len(data)):
        prompt_ids = prompts[i, prompt_length - int(valid_prompt_lengths[i]) :]
        response_ids = responses[i, : int(valid_response_lengths[i])]
        reward_model = reward_models[i] if reward_models is not None else None
        samples.append(
            ScoringInput(
                data_source=data_sources[i],
                prompt_str=tokenizer.decode(prompt_ids, skip_special_tokens=True),
                solution_str=tokenizer.decode(response_ids, skip_special_tokens=True),
                ground_truth=reward_model.get("ground_truth") if isinstance(reward_model, dict) else None,
                extra_info=extra_infos[i] if extra_infos is not None else None,
                valid_response_length=int(valid_response_lengths[i]),
            )
        )
    return samples


def place_scores(data: DataProto, samples: list[ScoringInput], scores: list[float]) -> torch.Tensor:
    """``token_level_scores (bs, R)``: each score at its sample's last valid response token (none if empty)."""
    reward_tensor = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
    for i, (sample, score) in enumerate(zip(samples, scores)):
        if sample.valid_response_length > 0:
            reward_tensor[i, sample.valid_response_length - 1] = score
    return reward_tensor


class AbstractRewardManager:
    """Base of the reward managers: verl's constructor arguments, the example printing, and the
    :class:`~verl.workers.reward_manager.function_scorer.RewardFunctionScorer` that calls ``compute_score`` in
    scoring processes under ``scoring`` (``reward_model.scoring``: time limit and failure policy)."""

    def __init__(
        self,
        tokenizer,
        num_examine: int,
        compute_score=None,
        reward_fn_key: str = "data_source",
        scoring: Any = None,
    ):
        from verl.utils.reward_score import default_compute_score
        from verl.workers.reward_manager.function_scorer import RewardFunctionScorer

        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.compute_score = compute_score or default_compute_score
        self.reward_fn_key = reward_fn_key
        self.scorer = RewardFunctionScorer(self.compute_score, scoring, reward_fn_key)

    def close(self) -> None:
        """Stop the scoring processes (they restart on the next call)."""
        self.scorer.close()

    def print_examples(self, samples: list[ScoringInput], scores: list[float]) -> None:
        """Print up to ``num_examine`` samples of every data source (prompt, response, truth, score)."""
        printed: dict[str, int] = defaultdict(int)
        for sample, score in zip(samples, scores):
            if printed[sample.data_source] >= self.num_examine:
                continue
            printed[sample.data_source] += 1
            print(f"[prompt] {sample.prompt_str}\n[response] {sample.solution_str}")
            print(f"[ground_truth] {sample.ground_truth}\n[score] {score}")

    @staticmethod
    def finish(
        data: DataProto,
        reward_tensor: torch.Tensor,
        extra_info: dict[str, list],
        return_dict: bool,
        metrics: dict[str, float] | None = None,
    ) -> torch.Tensor | dict[str, Any]:
        """verl's return convention: the tensor, or ``{"reward_tensor", "reward_extra_info"}`` plus this build's
        ``reward_metrics`` (batch-level counters such as ``reward/timeouts``, logged by the trainer)."""
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": extra_info, "reward_metrics": metrics or {}}
        return reward_tensor

    @staticmethod
    def precomputed(data: DataProto, return_dict: bool) -> torch.Tensor | dict[str, Any] | None:
        """Scores from a reward model already in the batch (``rm_scores``) are passed through unchanged."""
        if "rm_scores" not in data.batch.keys():
            return None
        scores = data.batch["rm_scores"]
        return {"reward_tensor": scores, "reward_extra_info": {}} if return_dict else scores
