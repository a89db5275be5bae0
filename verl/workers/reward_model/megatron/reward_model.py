"""The reward model on the Megatron engine: a frozen value model split by tensor and pipeline parallelism.

The engine (role ``reward``) builds the Hugging Face reward model as megatron-core chunks whose last stage ends in
the one-output value head (``score``, or a causal LM's saved value head); see
:func:`verl.workers.reward_model.loading.reward_head`. Micro-batches are packed and run through the pipeline; the
last stage reads each sequence's value at its last valid token, and the scores are broadcast over the pipeline
group, so tensor- and pipeline-parallel peers, which receive the same rows, return the same scores.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from verl.utils.device import current_device
from verl.workers.config.reward_model import RewardModelConfig
from verl.workers.reward_model.base import BaseRewardScorer, register_reward_scorer, scores_at_last_token


class MegatronRewardModel(BaseRewardScorer):
    """Scores this data-parallel rank's share of a batch with a built ``MegatronEngine`` of role ``reward``
    (``verl.workers.engine.megatron.engine``)."""

    def __init__(
        self, engine, micro_batch_size: int | None, use_dynamic_bsz: bool = False, max_token_len: int | None = None
    ):
        super().__init__(micro_batch_size, use_dynamic_bsz, max_token_len)
        self.engine = engine
        self.dp_rank = engine.dp_rank
        self.is_collect_rank = engine.is_collect_rank
        self.dp_group = engine.dp_group

    def score_micro_batches(self, micro_batches: list[TensorDict]) -> list[torch.Tensor]:
        micro_batches = [mb.to(current_device()) for mb in micro_batches]

        def step(index, packed, output):
            values = self.engine.values(output, packed)  # (mb, S)
            return None, scores_at_last_token(values, micro_batches[index]["attention_mask"]).float().cpu()

        self.engine.load_params()
        scores = self.engine.run(micro_batches, step, forward_only=True)
        self.engine.offload_params()
        return self.engine.broadcast_from_last_stage(scores)


@register_reward_scorer("megatron")
def megatron_reward_model(config: RewardModelConfig) -> MegatronRewardModel:
    """The reward model on megatron-core with the layout of ``reward_model.megatron``."""
    from verl.workers.engine.megatron.engine import MegatronEngine

    engine = MegatronEngine(config.model, config.megatron, None, role="reward").initialize()
    return MegatronRewardModel(
        engine,
        micro_batch_size=config.micro_batch_size_per_gpu,
        use_dynamic_bsz=bool(config.use_dynamic_bsz),
        max_token_len=int(config.forward_max_token_len_per_gpu),
    )
