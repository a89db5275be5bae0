"""Data-parallel PPO critic over an FSDP2 value model (``AutoModelForTokenClassification``, ``num_labels=1``).

Value of the state before response token ``t`` is read at position ``t - 1`` (like the log-probs):
``values = v[:, -R - 1 : -1]``. The loss is the clipped value loss of PPO (Schulman et al. 2017, eq. 9's
value term as implemented in OpenAI baselines):

    v_clip = values_old + clip(v - values_old, -c, c)
    vf_loss = 0.5 * agg(max((v - returns)^2, (v_clip - returns)^2))

aggregated with the mini-batch's global token counts, so 1 and N ranks and any micro-batch split agree. With
Ulysses sequence parallelism (``ulysses``) counts and metrics are summed over the data-parallel group and token
budgets scaled by the sequence-parallel size, as in ``DataParallelPPOActor``.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn

from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import compute_value_loss
from verl.utils.device import current_device
from verl.workers.config import CriticConfig
from verl.workers.critic.base import BasePPOCritic
from verl.workers.engine.fsdp.accumulation import accumulation, forward_only
from verl.workers.engine.fsdp.forward import forward_values
from verl.workers.engine.fsdp.optim import clip_grad_norm_and_step
from verl.workers.engine.fsdp.ulysses import UlyssesMesh
from verl.workers.engine.micro_batches import (
    all_reduce_sum,
    dp_world_size,
    global_counts,
    plan_micro_batches,
    token_budget,
)

MODEL_INPUT_KEYS = ["responses", "input_ids", "attention_mask", "position_ids"]


class DataParallelPPOCritic(BasePPOCritic):
    """``config`` is a ``CriticConfig`` whose ``ppo_mini_batch_size`` is already per rank."""

    def __init__(
        self,
        config: CriticConfig,
        critic_module: nn.Module,
        critic_optimizer: torch.optim.Optimizer | None = None,
        use_remove_padding: bool = True,
        ulysses: UlyssesMesh | None = None,
    ):
        super().__init__(config)
        self.critic_module = critic_module
        self.critic_optimizer = critic_optimizer
        self.use_remove_padding = use_remove_padding
        self.ulysses = ulysses if ulysses is not None and ulysses.enabled else None
        self.sp_size = self.ulysses.sp_size if self.ulysses is not None else 1
        self.dp_group = self.ulysses.dp_group if self.ulysses is not None else None  # None: every rank
        if self.ulysses is not None and not use_remove_padding:
            raise ValueError("critic.ulysses_sequence_parallel_size > 1 needs critic.model.use_remove_padding=True")

    def _forward_micro_batch(self, micro_batch) -> torch.Tensor:
        response_length = micro_batch["responses"].shape[-1]
        values = forward_values(
            self.critic_module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            use_remove_padding=self.use_remove_padding,
            ulysses=self.ulysses,
        )
        valid = micro_batch["attention_mask"][:, -response_length:].bool()
        return torch.where(valid, values[:, -response_length - 1 : -1], 0.0)

    def compute_values(self, data: DataProto) -> torch.Tensor:
        """Values ``(bs, R)``, zero outside ``response_mask``."""
        self.critic_module.eval()
        meta = data.meta_info
        plan = plan_micro_batches(
            data.select(batch_keys=MODEL_INPUT_KEYS + ["response_mask"]).batch,
            meta.get("micro_batch_size"),
            bool(meta.get("use_dynamic_bsz", False)),
            token_budget(meta.get("max_token_len"), self.sp_size),
        )
        with torch.no_grad(), forward_only(self.critic_module):
            values = torch.cat([self._forward_micro_batch(mb.to(current_device())).cpu() for mb in plan.micro_batches])
        return plan.restore(values)

    def update_critic(self, data: DataProto) -> dict[str, list[float]]:
        if self.critic_optimizer is None:
            raise RuntimeError("update_critic needs an optimizer; build the critic with critic_optimizer")
        config = self.config
        self.critic_module.train()
        data = data.select(batch_keys=MODEL_INPUT_KEYS + ["response_mask", "values", "returns"])
        metrics: dict[str, list[float]] = defaultdict(list)
        world = dp_world_size()
        mini_batch_size = int(config.ppo_mini_batch_size)
        if mini_batch_size <= 0 or len(data) % mini_batch_size:
            raise ValueError(
                f"per-rank batch of {len(data)} rows is not divisible by the per-rank critic ppo_mini_batch_size "
                f"{mini_batch_size}"
            )
        for epoch in range(int(config.ppo_epochs)):
            epoch_data = data
            if config.shuffle:
                generator = torch.Generator().manual_seed(config.data_loader_seed + epoch)
                epoch_data = data.select_idxs(torch.randperm(len(data), generator=generator).numpy())
            for mini_batch in epoch_data.split(mini_batch_size):
                num_tokens, num_seqs = global_counts(mini_batch.batch["response_mask"], self.dp_group)
                plan = plan_micro_batches(
                    mini_batch.batch,
                    config.ppo_micro_batch_size_per_gpu,
                    config.use_dynamic_bsz,
                    token_budget(config.ppo_max_token_len_per_gpu, self.sp_size),
                )
                self.critic_optimizer.zero_grad(set_to_none=True)
                vf_loss_sum, clipped_tokens, vpred_sum = 0.0, 0.0, 0.0
                with accumulation(self.critic_module, plan.micro_batches) as micro_batches:
                    for micro_batch in micro_batches:
                        micro_batch = micro_batch.to(current_device())
                        response_mask = micro_batch["response_mask"].float()
                        vpreds = self._forward_micro_batch(micro_batch)
                        vf_loss, vf_clipfrac = compute_value_loss(
                            vpreds=vpreds,
                            returns=micro_batch["returns"],
                            values=micro_batch["values"],
                            response_mask=response_mask,
                            cliprange_value=config.cliprange_value,
                            loss_agg_mode=config.loss_agg_mode,
                            global_num_tokens=num_tokens,
                            global_num_seqs=num_seqs,
                        )
                        (vf_loss * world).backward()
                        vf_loss_sum += float(vf_loss.detach())
                        # clip fraction and mean value over the whole mini-batch (all ranks), not per micro-batch
                        clipped_tokens += float(vf_clipfrac) * float(response_mask.sum())
                        vpred_sum += float((vpreds.detach() * response_mask).sum())
                grad_norm = clip_grad_norm_and_step(self.critic_module, self.critic_optimizer, config.grad_clip)
                group = self.dp_group
                metrics["critic/vf_loss"].append(all_reduce_sum(vf_loss_sum, group))
                metrics["critic/vf_clipfrac"].append(all_reduce_sum(clipped_tokens, group) / max(num_tokens, 1.0))
                metrics["critic/vpred_mean"].append(all_reduce_sum(vpred_sum, group) / max(num_tokens, 1.0))
                metrics["critic/grad_norm"].append(grad_norm)
        self.critic_optimizer.zero_grad(set_to_none=True)
        return dict(metrics)
