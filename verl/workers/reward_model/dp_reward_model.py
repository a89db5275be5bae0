"""Micro-batched reward-model forward: ``scores (bs,)`` = the per-token value at each row's last valid token.

Micro-batches are fixed-size (``micro_batch_size_per_gpu``) or formed by token budget
(``use_dynamic_bsz`` with ``forward_max_token_len_per_gpu``), and the scores come back in the input order.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torch import nn

from verl.utils.device import current_device
from verl.workers.engine.fsdp.forward import forward_values
from verl.workers.engine.micro_batches import plan_micro_batches
from verl.workers.reward_model.inputs import RewardInputs, last_valid_index


class DataParallelRewardModel:
    """Scores this rank's share of a batch with a module whose ``logits`` are ``(bs, S, 1)``."""

    def __init__(
        self,
        module: nn.Module,
        micro_batch_size: int | None,
        use_dynamic_bsz: bool = False,
        max_token_len: int | None = None,
        use_remove_padding: bool = False,
    ):
        self.module = module
        self.micro_batch_size = micro_batch_size
        self.use_dynamic_bsz = use_dynamic_bsz
        self.max_token_len = max_token_len
        self.use_remove_padding = use_remove_padding

    def _forward(self, micro_batch: TensorDict) -> torch.Tensor:
        values = forward_values(
            self.module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            use_remove_padding=self.use_remove_padding,
        )  # (mb, S)
        last = last_valid_index(micro_batch["attention_mask"])
        return values[torch.arange(values.shape[0], device=values.device), last]

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
        self.module.eval()
        with torch.no_grad():
            scores = [self._forward(mb.to(current_device())).float().cpu() for mb in plan.micro_batches]
        return plan.restore(torch.cat(scores))
