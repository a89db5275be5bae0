"""PPO actor on the Megatron engine: log-probs and the policy update through the tensor/pipeline-parallel model.

Same contract and loss as :class:`~verl.workers.actor.dp_actor.DataParallelPPOActor` (the loss is
:func:`~verl.workers.actor.loss.actor_loss`): every micro-batch loss is its share of the mini-batch loss,
aggregated with the mini-batch's token / sequence counts summed over the **data-parallel** group, so the engine's
sum of gradients over data-parallel ranks and micro-batches is the mini-batch gradient. Tensor- and
pipeline-parallel peers receive the same rows and compute the same loss; the last pipeline stage computes it and
its results (log-probs, metrics) are broadcast to the other stages.
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial

import torch

from verl.protocol import DataProto
from verl.utils.device import current_device
from verl.workers.actor.base import BasePPOActor
from verl.workers.actor.loss import (
    actor_loss,
    mini_batches,
    needs_entropy,
    reduce_step_metrics,
    require_on_policy,
    update_keys,
)
from verl.workers.engine.micro_batches import all_reduce_sum, global_counts, plan_micro_batches

MODEL_INPUT_KEYS = ["responses", "input_ids", "attention_mask", "position_ids"]


def response_slice(full: torch.Tensor, micro_batch) -> torch.Tensor:
    """``(bs, R)`` response part of a ``(bs, S)`` next-token tensor, zero where the response is padding."""
    response_length = micro_batch["responses"].shape[-1]
    valid = micro_batch["attention_mask"][:, -response_length:].bool()
    return torch.where(valid, full[:, -response_length - 1 : -1], 0.0)


class MegatronPPOActor(BasePPOActor):
    """``config`` is an ``ActorConfig`` whose ``ppo_mini_batch_size`` is per data-parallel rank; ``engine`` a
    built :class:`~verl.workers.engine.megatron.engine.MegatronEngine`."""

    def __init__(self, config, engine):
        super().__init__(config)
        self.engine = engine

    def _log_probs(self, micro_batch, packed, output, temperature: float, calculate_entropy: bool):
        log_probs, entropy = self.engine.log_probs(output, packed, temperature, calculate_entropy)
        log_probs = response_slice(log_probs, micro_batch)
        return log_probs, response_slice(entropy, micro_batch) if entropy is not None else None

    # ------------------------------------------------------------------ forward
    def compute_log_prob(self, data: DataProto, calculate_entropy: bool = False):
        """Log-probs ``(bs, R)`` of the responses (and entropy, or None); ``meta_info`` gives
        ``micro_batch_size``, ``temperature``, ``use_dynamic_bsz`` and ``max_token_len``. Equal on every rank."""
        meta = data.meta_info
        temperature = meta.get("temperature", 1.0)
        plan = plan_micro_batches(
            data.select(batch_keys=MODEL_INPUT_KEYS).batch,
            meta.get("micro_batch_size"),
            bool(meta.get("use_dynamic_bsz", False)),
            meta.get("max_token_len"),
        )
        micro_batches = [mb.to(current_device()) for mb in plan.micro_batches]

        def step(index, packed, output):
            log_probs, entropy = self._log_probs(micro_batches[index], packed, output, temperature, calculate_entropy)
            return None, (log_probs.cpu(), entropy.cpu() if entropy is not None else None)

        self.engine.load_params()
        results = self.engine.run(micro_batches, step, forward_only=True)
        self.engine.offload_params()
        results = self.engine.broadcast_from_last_stage(results)
        log_probs = plan.restore(torch.cat([r[0] for r in results]))
        entropys = plan.restore(torch.cat([r[1] for r in results])) if calculate_entropy else None
        return log_probs, entropys

    # ------------------------------------------------------------------ update
    def _loss_step(self, micro_batches, temperature, counts, index, packed, output):
        """Loss and metrics of micro-batch ``index`` from the last stage's ``output``."""
        micro_batch = micro_batches[index]
        calculate_entropy = needs_entropy(self.config, micro_batch)
        log_prob, entropy = self._log_probs(micro_batch, packed, output, temperature, calculate_entropy)
        return actor_loss(self.config, log_prob, entropy, micro_batch, counts)

    def update_policy(self, data: DataProto) -> dict[str, list[float]]:
        """``ppo_epochs`` x mini-batches x micro-batches with gradient accumulation; one optimizer step per
        mini-batch. Metrics as the FSDP actor's: loss terms are whole mini-batch values, ratio metrics averaged
        over micro-batches."""
        engine = self.engine
        if engine.optimizer is None:
            raise RuntimeError("update_policy needs an optimizer; build the engine with role='actor'")
        config = self.config
        temperature = data.meta_info.get("temperature", 1.0)
        if "old_log_probs" not in data.batch.keys():
            require_on_policy(config, data)
        data = data.select(batch_keys=update_keys(config, data, MODEL_INPUT_KEYS))
        metrics: dict[str, list[float]] = defaultdict(list)
        engine.load_params()
        engine.load_optimizer()
        for epoch in range(int(config.ppo_epochs)):
            for mini_batch in mini_batches(config, data, epoch):
                counts = global_counts(mini_batch.batch["response_mask"], group=engine.dp_group)
                plan = plan_micro_batches(
                    mini_batch.batch,
                    config.ppo_micro_batch_size_per_gpu,
                    config.use_dynamic_bsz,
                    config.ppo_max_token_len_per_gpu,
                )
                micro_batches = [mb.to(current_device()) for mb in plan.micro_batches]
                engine.zero_grad()
                step = partial(self._loss_step, micro_batches, temperature, counts)
                micro_metrics = engine.run(micro_batches, step, forward_only=False)
                grad_norm = engine.optimizer_step()
                micro_metrics = engine.broadcast_from_last_stage(micro_metrics)
                step_metrics: dict[str, list[float]] = defaultdict(list)
                for one in micro_metrics:
                    for name, value in one.items():
                        step_metrics[name].append(value)
                reduce = partial(all_reduce_sum, group=engine.dp_group)
                for name, value in reduce_step_metrics(step_metrics, reduce).items():
                    metrics[name].append(value)
                metrics["actor/grad_norm"].append(grad_norm)
        engine.offload_optimizer()
        engine.offload_params()
        return dict(metrics)
