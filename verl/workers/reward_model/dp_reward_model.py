"""The reward model on the FSDP2 engine: micro-batched forwards of a module whose ``logits`` are ``(bs, S, 1)``
(see :mod:`verl.workers.reward_model.base` for the scoring contract)."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torch import nn

from verl.utils.device import current_device
from verl.workers.config.reward_model import RewardModelConfig
from verl.workers.engine.fsdp.accumulation import forward_only
from verl.workers.engine.fsdp.forward import forward_values
from verl.workers.reward_model.base import BaseRewardScorer, register_reward_scorer, scores_at_last_token


class DataParallelRewardModel(BaseRewardScorer):
    """Scores this rank's share of a batch with ``module`` (every rank is its own data-parallel rank)."""

    def __init__(
        self,
        module: nn.Module,
        micro_batch_size: int | None,
        use_dynamic_bsz: bool = False,
        max_token_len: int | None = None,
        use_remove_padding: bool = False,
        engine=None,
    ):
        super().__init__(micro_batch_size, use_dynamic_bsz, max_token_len)
        self.module = module
        self.engine = engine  # the FSDPEngine that shards ``module`` (None when a test passes a bare module)
        self.use_remove_padding = use_remove_padding
        if torch.distributed.is_initialized():
            self.dp_rank = torch.distributed.get_rank()

    def _forward(self, micro_batch: TensorDict) -> torch.Tensor:
        values = forward_values(
            self.module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            use_remove_padding=self.use_remove_padding,
        )  # (mb, S)
        return scores_at_last_token(values, micro_batch["attention_mask"])

    def score_micro_batches(self, micro_batches: list[TensorDict]) -> list[torch.Tensor]:
        self.module.eval()
        with forward_only(self.module):
            return [self._forward(mb.to(current_device())).float().cpu() for mb in micro_batches]


@register_reward_scorer("fsdp")
@register_reward_scorer("fsdp2")
def fsdp_reward_model(config: RewardModelConfig) -> DataParallelRewardModel:
    """The reward model sharded with FSDP2 over the worker group (``reward_model.model.fsdp_config``)."""
    from verl.workers.engine.fsdp.engine import FSDPEngine

    model_config = config.model
    engine = FSDPEngine(model_config, model_config.fsdp_config, None, role="reward").initialize()
    return DataParallelRewardModel(
        engine.forward_module,
        micro_batch_size=config.micro_batch_size_per_gpu,
        use_dynamic_bsz=bool(config.use_dynamic_bsz),
        max_token_len=int(config.forward_max_token_len_per_gpu),
        use_remove_padding=bool(model_config.use_remove_padding),
        engine=engine,
    )
