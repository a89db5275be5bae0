"""PPO critic on the Megatron engine: values and the clipped value-loss update.

Same contract and loss as :class:`~verl.workers.critic.dp_critic.DataParallelPPOCritic`: the value of the state
before response token ``t`` is read at position ``t - 1``, and

    v_clip = values_old + clip(v - values_old, -c, c)
    vf_loss = 0.5 * agg(max((v - returns)^2, (v_clip - returns)^2))

aggregated with the mini-batch's token counts summed over the data-parallel group.
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial

import torch

from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import compute_value_loss
from verl.utils.device import current_device
from verl.workers.actor.loss import mini_batches
from verl.workers.actor.megatron_actor import response_slice
from verl.workers.critic.base import BasePPOCritic
from verl.workers.engine.micro_batches import all_reduce_sum, global_counts, plan_micro_batches

MODEL_INPUT_KEYS = ["responses", "input_ids", "attention_mask", "position_ids"]


class MegatronPPOCritic(BasePPOCritic):
    """``config`` is a ``CriticConfig`` whose ``ppo_mini_batch_size`` is per data-parallel rank; ``engine`` a
    built critic :class:`~verl.workers.engine.megatron.engine.MegatronEngine`."""

    def __init__(self, config, engine):
        super().__init__(config)
        self.engine = engine

    def compute_values(self, data: DataProto) -> torch.Tensor:
        """Values ``(bs, R)``, zero outside the response (equal on every rank)."""
        meta = data.meta_info
        plan = plan_micro_batches(
            data.select(batch_keys=MODEL_INPUT_KEYS).batch,
            meta.get("micro_batch_size"),
            bool(meta.get("use_dynamic_bsz", False)),
            meta.get("max_token_len"),
        )
        micro_batches = [mb.to(current_device()) for mb in plan.micro_batches]

        def step(index, packed, output):
            return None, response_slice(self.engine.values(output, packed), micro_batches[index]).cpu()

        self.engine.load_params()
        results = self.engine.run(micro_batches, step, forward_only=True)
        self.engine.offload_params()
        return plan.restore(torch.cat(self.engine.broadcast_from_last_stage(results)))

    def _loss_step(self, micro_batches, counts, index, packed, output):
        micro_batch = micro_batches[index]
        response_mask = micro_batch["response_mask"].float()
        vpreds = response_slice(self.engine.values(output, packed), micro_batch)
        num_tokens, num_seqs = counts
        vf_loss, vf_clipfrac = compute_value_loss(
            vpreds=vpreds,
            returns=micro_batch["returns"],
            values=micro_batch["values"],
            response_mask=response_mask,
            cliprange_value=self.config.cliprange_value,
            loss_agg_mode=self.config.loss_agg_mode,
            global_num_tokens=num_tokens,
            global_num_seqs=num_seqs,
        )
        # clip fraction and mean value over the whole mini-batch (all ranks), not per micro-batch
        stats = (
            float(vf_loss.detach()),
            float(vf_clipfrac) * float(response_mask.sum()),
            float((vpreds.detach() * response_mask).sum()),
        )
        return vf_loss, stats

    def update_critic(self, data: DataProto) -> dict[str, list[float]]:
        engine = self.engine
        if engine.optimizer is None:
            raise RuntimeError("update_critic needs an optimizer; build the engine with role='critic'")
        config = self.config
        data = data.select(batch_keys=MODEL_INPUT_KEYS + ["response_mask", "values", "returns"])
        metrics: dict[str, list[float]] = defaultdict(list)
        reduce = partial(all_reduce_sum, group=engine.dp_group)
        engine.load_params()
        engine.load_optimizer()
        for epoch in range(int(config.ppo_epochs)):
            for mini_batch in mini_batches(config, data, epoch):
                num_tokens, num_seqs = global_counts(mini_batch.batch["response_mask"], group=engine.dp_group)
                plan = plan_micro_batches(
                    mini_batch.batch,
                    config.ppo_micro_batch_size_per_gpu,
                    config.use_dynamic_bsz,
                    config.ppo_max_token_len_per_gpu,
                )
                micro_batches = [mb.to(current_device()) for mb in plan.micro_batches]
                engine.zero_grad()
                step = partial(self._loss_step, micro_batches, (num_tokens, num_seqs))
                stats = engine.run(micro_batches, step, forward_only=False)
                grad_norm = engine.optimizer_step()
                loss_sum, clipped, vpred_sum = (sum(s[i] for s in stats) for i in range(3))
                loss_sum, clipped, vpred_sum = engine.broadcast_from_last_stage((loss_sum, clipped, vpred_sum))
                metrics["critic/vf_loss"].append(reduce(loss_sum))
                metrics["critic/vf_clipfrac"].append(reduce(clipped) / max(num_tokens, 1.0))
                metrics["critic/vpred_mean"].append(reduce(vpred_sum) / max(num_tokens, 1.0))
                metrics["critic/grad_norm"].append(grad_norm)
        engine.offload_optimizer()
        engine.offload_params()
        return dict(metrics)
