"""What every reward-model engine provides to :class:`~verl.workers.reward_model.role.RewardModelRole`: a scorer
that turns :class:`~verl.workers.reward_model.inputs.RewardInputs` into one score per row, built by strategy.

``scores (bs,)`` = the per-token value ``v (bs, S)`` at each row's last valid token (verl's convention), computed
over micro-batches of ``micro_batch_size`` rows, or of at most ``max_token_len`` tokens with ``use_dynamic_bsz``;
the scores come back in the input order. An engine registers a builder with ``@register_reward_scorer(strategy)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
from tensordict import TensorDict

from verl.utils.registry import Registry
from verl.workers.config.reward_model import RewardModelConfig
from verl.workers.engine.micro_batches import plan_micro_batches
from verl.workers.reward_model.inputs import RewardInputs, last_valid_index

REWARD_SCORER_REGISTRY: Registry[Callable[[RewardModelConfig], BaseRewardScorer]] = Registry(
    "reward-model engine",
    "reward_model.strategy",
    package="verl.workers.reward_model",
    decorator="register_reward_scorer",
)


def register_reward_scorer(strategy: str) -> Callable:
    """Decorator of ``build(config: RewardModelConfig) -> BaseRewardScorer`` for ``reward_model.strategy``."""
    return REWARD_SCORER_REGISTRY.register(strategy)


def build_reward_scorer(config: RewardModelConfig) -> BaseRewardScorer:
    """The scorer of ``config.strategy`` with its model loaded (unknown strategies fail listing the registered)."""
    return REWARD_SCORER_REGISTRY.get(config.strategy)(config)


def scores_at_last_token(values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``(bs,)``: ``values (bs, S)`` at each row's last valid position of ``attention_mask (bs, S)``."""
    last = last_valid_index(attention_mask).to(values.device)
    return values[torch.arange(values.shape[0], device=values.device), last]


class BaseRewardScorer(ABC):
    """Micro-batching shared by the engines; a subclass scores the micro-batches of this rank."""

    dp_rank: int = 0
    """This worker's data-parallel rank: which share of a dispatched batch it scores."""

    is_collect_rank: bool = True
    """Whether the single controller collects this worker's output (one worker per data-parallel rank)."""

    dp_group = None
    """Process group of the data-parallel ranks (None: every rank), over which batch statistics are summed."""

    def __init__(self, micro_batch_size: int | None, use_dynamic_bsz: bool = False, max_token_len: int | None = None):
        self.micro_batch_size = micro_batch_size
        self.use_dynamic_bsz = use_dynamic_bsz
        self.max_token_len = max_token_len

    @abstractmethod
    def score_micro_batches(self, micro_batches: list[TensorDict]) -> list[torch.Tensor]:
        """``(mb,)`` float32 CPU scores of each micro-batch (``input_ids``, ``attention_mask``, ``position_ids``)."""

    def compute_scores(self, inputs: RewardInputs) -> torch.Tensor:
        """``(bs,)`` float32 scores of ``inputs`` in their row order."""
        batch = TensorDict(
            {
                "input_ids": inputs.input_ids,
                "attention_mask": inputs.attention_mask,
                "position_ids": inputs.position_ids,
            },
            batch_size=[inputs.input_ids.shape[0]],
        )
        plan = plan_micro_batches(batch, self.micro_batch_size, self.use_dynamic_bsz, self.max_token_len)
        with torch.no_grad():
            scores = self.score_micro_batches(plan.micro_batches)
        return plan.restore(torch.cat(scores))
