"""Data-parallel PPO actor over an FSDP2 module: log-probs and the clipped-surrogate policy update.

The update is the same on 1 or N ranks and for any micro-batch split: every micro-batch loss is its share of
the mini-batch loss (aggregated with the mini-batch's global token / sequence counts over all ranks), the
shares are summed by gradient accumulation, and the loss is multiplied by the data-parallel size because
FSDP averages gradients over ranks.

    loss = pg_loss - entropy_coeff * entropy + kl_loss_coef * KL(pi || pi_ref)     (all via ``agg_loss``)
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn

from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import agg_loss, get_policy_loss_fn, kl_penalty
from verl.utils.device import current_device
from verl.workers.actor.base import BasePPOActor
from verl.workers.config import ActorConfig, RefConfig
from verl.workers.engine.fsdp.forward import forward_log_probs
from verl.workers.engine.fsdp.optim import clip_grad_norm_and_step
from verl.workers.engine.micro_batches import all_reduce_sum, dp_world_size, global_counts, plan_micro_batches
from verl.workers.engine.multimodal_inputs import micro_batch_multi_modal_inputs, with_row_index

MODEL_INPUT_KEYS = ["responses", "input_ids", "attention_mask", "position_ids"]
MULTI_MODAL_KEY = "multi_modal_inputs"


def _tensor_batch(data: DataProto):
    """The tensor batch, with row indices when samples carry ``multi_modal_inputs`` (to find them per micro-batch)."""
    return with_row_index(data.batch) if MULTI_MODAL_KEY in data.non_tensor_batch else data.batch


def _scalar(value) -> float:
    return float(value.detach().item()) if isinstance(value, torch.Tensor) else float(value)


class DataParallelPPOActor(BasePPOActor):
    """``config`` is an ``ActorConfig`` whose ``ppo_mini_batch_size`` is already per rank (in samples, i.e.
    multiplied by ``rollout.n`` and divided by the data-parallel size, as the worker does); the frozen reference
    policy passes its ``RefConfig`` and only computes log-probs."""

    SUMMED_METRICS = frozenset({"actor/pg_loss", "actor/entropy", "actor/kl_loss"})
    """Loss metrics that are micro-batch shares of the mini-batch value (summed over micro-batches and ranks)."""

    def __init__(
        self,
        config: ActorConfig | RefConfig,
        actor_module: nn.Module,
        actor_optimizer: torch.optim.Optimizer | None = None,
        use_remove_padding: bool = True,
    ):
        super().__init__(config)
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_remove_padding = use_remove_padding

    # ------------------------------------------------------------------ forward
    def _forward_micro_batch(self, micro_batch, temperature: float, calculate_entropy: bool, multi_modal_rows=None):
        """``(log_probs (bs, R), entropy (bs, R) | None)`` for one micro-batch TensorDict; ``multi_modal_rows`` is
        the batch's ``multi_modal_inputs`` column (None for text)."""
        response_length = micro_batch["responses"].shape[-1]
        log_probs, entropy = forward_log_probs(
            self.actor_module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            temperature=temperature,
            calculate_entropy=calculate_entropy,
            use_remove_padding=self.use_remove_padding,
            multi_modal_inputs=micro_batch_multi_modal_inputs(
                multi_modal_rows, micro_batch, micro_batch["input_ids"].device
            ),
        )
        # zero outside the response: the slot after a sequence's last token holds a cross-sequence label
        valid = micro_batch["attention_mask"][:, -response_length:].bool()
        log_probs = torch.where(valid, log_probs[:, -response_length - 1 : -1], 0.0)
        if entropy is not None:
            entropy = torch.where(valid, entropy[:, -response_length - 1 : -1], 0.0)
        return log_probs, entropy

    def compute_log_prob(self, data: DataProto, calculate_entropy: bool = False):
        """Log-probs ``(bs, R)`` of the responses; ``meta_info`` gives ``micro_batch_size``, ``temperature``,
        ``use_dynamic_bsz`` and ``max_token_len``. Returns ``(log_probs, entropys or None)``."""
        self.actor_module.eval()
        meta = data.meta_info
        temperature = meta.get("temperature", 1.0)
        data = data.select(batch_keys=MODEL_INPUT_KEYS)
        multi_modal_rows = data.non_tensor_batch.get(MULTI_MODAL_KEY)
        plan = plan_micro_batches(
            _tensor_batch(data),
            meta.get("micro_batch_size"),
            bool(meta.get("use_dynamic_bsz", False)),
            meta.get("max_token_len"),
        )
        log_probs, entropys = [], []
        with torch.no_grad():
            for micro_batch in plan.micro_batches:
                micro_batch = micro_batch.to(current_device())
                log_prob, entropy = self._forward_micro_batch(
                    micro_batch, temperature, calculate_entropy, multi_modal_rows
                )
                log_probs.append(log_prob.cpu())
                if entropy is not None:
                    entropys.append(entropy.cpu())
        log_probs_all = plan.restore(torch.cat(log_probs))
        entropys_all = plan.restore(torch.cat(entropys)) if calculate_entropy else None
        return log_probs_all, entropys_all

    # ------------------------------------------------------------------ update
    def _mini_batches(self, data: DataProto, epoch: int) -> list[DataProto]:
        if self.config.shuffle:
            generator = torch.Generator().manual_seed(self.config.data_loader_seed + epoch)
            data = data.select_idxs(torch.randperm(len(data), generator=generator).numpy())
        mini_batch_size = int(self.config.ppo_mini_batch_size)
        if mini_batch_size <= 0 or len(data) % mini_batch_size:
            raise ValueError(
                f"per-rank batch of {len(data)} rows is not divisible by the per-rank ppo_mini_batch_size "
                f"{mini_batch_size}; adjust actor.ppo_mini_batch_size / data.train_batch_size"
            )
        return data.split(mini_batch_size)

    def _micro_batch_loss(
        self,
        micro_batch,
        temperature: float,
        counts: tuple[float, float],
        multi_modal_rows=None,
        entropy_coeff: float | None = None,
    ):
        """The micro-batch's share of the mini-batch loss, and its metrics; ``entropy_coeff`` overrides the
        config's (the trainer's adaptive entropy control sends it per step)."""
        config = self.config
        loss_agg_mode = config.loss_agg_mode
        num_tokens, num_seqs = counts
        entropy_coeff = config.entropy_coeff if entropy_coeff is None else entropy_coeff
        log_prob, entropy = self._forward_micro_batch(micro_batch, temperature, entropy_coeff != 0, multi_modal_rows)
        response_mask = micro_batch["response_mask"].to(log_prob.dtype)
        policy_loss_fn = get_policy_loss_fn(config.policy_loss.loss_mode)
        pg_loss, pg_metrics = policy_loss_fn(
            old_log_prob=micro_batch["old_log_probs"],
            log_prob=log_prob,
            advantages=micro_batch["advantages"],
            response_mask=response_mask,
            loss_agg_mode=loss_agg_mode,
            config=config,
            rollout_is_weights=micro_batch.get("rollout_is_weights", None),
            global_num_tokens=num_tokens,
            global_num_seqs=num_seqs,
        )
        loss = pg_loss
        metrics = {"actor/pg_loss": _scalar(pg_loss)}
        for name, value in pg_metrics.items():
            metrics[name if name.startswith("actor/") else f"actor/{name}"] = _scalar(value)
        agg = dict(loss_agg_mode=loss_agg_mode, global_num_tokens=num_tokens, global_num_seqs=num_seqs)
        if entropy_coeff != 0:
            entropy_loss = agg_loss(entropy, response_mask, **agg)
            loss = loss - entropy_coeff * entropy_loss
            metrics["actor/entropy"] = _scalar(entropy_loss)
        if config.use_kl_loss:
            kld = kl_penalty(log_prob, micro_batch["ref_log_prob"], config.kl_loss_type)
            kl_loss = agg_loss(kld, response_mask, **agg)
            loss = loss + config.kl_loss_coef * kl_loss
            metrics["actor/kl_loss"] = _scalar(kl_loss)
            metrics["actor/kl_coef"] = float(config.kl_loss_coef)
        return loss, metrics

    def _global_counts(self, mini_batch: DataProto) -> tuple[float, float]:
        """``(tokens, sequences)`` of the mini-batch over all ranks, the denominators of ``agg_loss``."""
        return global_counts(mini_batch.batch["response_mask"])

    def _update_keys(self, data: DataProto) -> list[str]:
        """Batch columns the update reads (a loss that needs others, e.g. a teacher's, extends this)."""
        keys = MODEL_INPUT_KEYS + ["response_mask", "old_log_probs", "advantages"]
        if self.config.use_kl_loss:
            keys.append("ref_log_prob")
        if "rollout_is_weights" in data.batch.keys():
            keys.append("rollout_is_weights")
        return keys

    def update_policy(self, data: DataProto) -> dict[str, list[float]]:
        """``ppo_epochs`` × mini-batches × micro-batches with gradient accumulation; one optimizer step per
        mini-batch. Loss metrics are the whole mini-batch's values (summed shares over micro-batches and
        ranks); ratio metrics (clip fractions, ppo_kl) are averaged over micro-batches."""
        if self.actor_optimizer is None:
            raise RuntimeError("update_policy needs an optimizer; build the actor with actor_optimizer")
        config = self.config
        self.actor_module.train()
        temperature = data.meta_info.get("temperature", 1.0)
        entropy_coeff = data.meta_info.get("entropy_coeff")
        data = data.select(
            batch_keys=self._update_keys(data),
            non_tensor_batch_keys=[MULTI_MODAL_KEY] if MULTI_MODAL_KEY in data.non_tensor_batch else [],
        )
        summed = self.SUMMED_METRICS
        metrics: dict[str, list[float]] = defaultdict(list)
        world = dp_world_size()
        for epoch in range(int(config.ppo_epochs)):
            for mini_batch in self._mini_batches(data, epoch):
                counts = self._global_counts(mini_batch)
                multi_modal_rows = mini_batch.non_tensor_batch.get(MULTI_MODAL_KEY)
                plan = plan_micro_batches(
                    _tensor_batch(mini_batch),
                    config.ppo_micro_batch_size_per_gpu,
                    config.use_dynamic_bsz,
                    config.ppo_max_token_len_per_gpu,
                )
                self.actor_optimizer.zero_grad(set_to_none=True)
                step_metrics: dict[str, list[float]] = defaultdict(list)
                for micro_batch in plan.micro_batches:
                    micro_batch = micro_batch.to(current_device())
                    loss, micro_metrics = self._micro_batch_loss(
                        micro_batch, temperature, counts, multi_modal_rows, entropy_coeff
                    )
                    (loss * world).backward()
                    for name, value in micro_metrics.items():
                        step_metrics[name].append(value)
                grad_norm = clip_grad_norm_and_step(self.actor_module, self.actor_optimizer, config.grad_clip)
                for name, values in step_metrics.items():
                    if name in summed:
                        metrics[name].append(all_reduce_sum(sum(values)))
                    else:
                        metrics[name].append(sum(values) / len(values))
                metrics["actor/grad_norm"].append(grad_norm)
        self.actor_optimizer.zero_grad(set_to_none=True)
        return dict(metrics)
