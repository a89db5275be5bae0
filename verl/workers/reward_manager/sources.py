"""Reward sources: each scores the rows of a batch it is given, as token-level scores plus per-row extras.

``rule`` (a reward manager), ``model`` (``rm_scores`` of the reward-model worker) and ``judge`` (a generative
judge) share one interface, :class:`RewardSource`, so that
:class:`~verl.workers.reward_manager.combined.CombinedReward` weights them alike and a call policy
(:mod:`verl.workers.reward_manager.guard`) can wrap any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from verl.protocol import DataProto
from verl.workers.reward_manager.abstract import decode_batch


@dataclass
class SourceScores:
    """A source's result for the ``bs`` rows it was given.

    ``token_scores (bs, R)`` holds each row's score at its last valid response token (a rule manager may spread
    it over tokens); ``extra_info`` holds per-row lists; ``metrics`` batch-level counters (``reward/<source>/...``).
    """

    token_scores: torch.Tensor
    extra_info: dict[str, list] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


class RewardSource(Protocol):
    """Scores rows. ``cancel`` (optional) stops a call in flight, e.g. a timed-out judge."""

    name: str

    def score(self, data: DataProto) -> SourceScores: ...


def response_mask(data: DataProto) -> torch.Tensor:
    """``(bs, R)`` valid-response mask from ``attention_mask``."""
    return data.batch["attention_mask"][:, -data.batch["responses"].shape[-1] :]


def at_last_token(data: DataProto, scores: list[float] | torch.Tensor) -> torch.Tensor:
    """``(bs, R)`` with ``scores[i]`` at row i's last valid response token (rows with an empty response get none)."""
    mask = response_mask(data)
    out = torch.zeros(mask.shape, dtype=torch.float32)
    lengths = mask.sum(-1)
    values = torch.as_tensor(scores, dtype=torch.float32)
    rows = torch.nonzero(lengths > 0).flatten()
    out[rows, lengths[rows] - 1] = values[rows]
    return out


class RuleSource:
    """The reward manager (``reward_model.reward_manager``) scoring with the rule or custom reward function."""

    name = "rule"

    def __init__(self, manager: Any):
        self.manager = manager

    def score(self, data: DataProto) -> SourceScores:
        if "rm_scores" in data.batch.keys():  # managers pass precomputed scores through (verl): hide them
            data = DataProto(
                batch=data.batch.exclude("rm_scores"), non_tensor_batch=data.non_tensor_batch, meta_info=data.meta_info
            )
        result = self.manager(data, return_dict=True)
        if isinstance(result, dict):
            return SourceScores(result["reward_tensor"], dict(result.get("reward_extra_info", {})))
        return SourceScores(result)


class ModelScoreSource:
    """``rm_scores`` written into the batch by the reward-model worker group (``reward_model.enable``)."""

    name = "model"

    def score(self, data: DataProto) -> SourceScores:
        if "rm_scores" not in data.batch.keys():
            raise KeyError(
                "the batch has no 'rm_scores': the reward model worker group (reward_model.enable=True, "
                "use_reward_loop=False) must score it before the reward function runs"
            )
        return SourceScores(data.batch["rm_scores"].float())


class JudgeSource:
    """A generative judge (:class:`~verl.workers.reward_model.judge.judge.GenerativeJudge`) over the decoded rows."""

    name = "judge"

    def __init__(self, judge: Any, tokenizer: Any, reward_fn_key: str = "data_source"):
        self.judge = judge
        self.tokenizer = tokenizer
        self.reward_fn_key = reward_fn_key

    def score(self, data: DataProto) -> SourceScores:
        from verl.workers.reward_model.judge.prompts import JudgeSample, last_user_message

        decoded = decode_batch(data, self.tokenizer, self.reward_fn_key)
        chats = data.non_tensor_batch.get("raw_prompt")
        samples = []
        for i, sample in enumerate(decoded):
            question = last_user_message(chats[i]) if chats is not None else None
            samples.append(
                JudgeSample(
                    prompt=sample.prompt_str if question is None else question,
                    response=sample.solution_str,
                    ground_truth=sample.ground_truth,
                    data_source=str(sample.data_source),
                )
            )
        judged = self.judge.score(samples)
        extra = {"judge_parse_failed": [float(f) for f in judged.parse_failed]}
        return SourceScores(at_last_token(data, judged.scores), extra, judged.metrics())

    def cancel(self) -> None:
        self.judge.cancel()
