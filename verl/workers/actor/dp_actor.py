"""Data-parallel PPO actor over an FSDP2 module: log-probs and the clipped-surrogate policy update.

The update is the same on 1 or N ranks and for any micro-batch split: every micro-batch loss is its share of
the mini-batch loss (aggregated with the mini-batch's global token / sequence counts over the data-parallel
ranks), the shares are summed by gradient accumulation, and the loss is multiplied by the world size because
FSDP averages gradients over all ranks. With Ulysses sequence parallelism (``ulysses``) a group of ranks shares
each micro-batch, each running a slice of its tokens: counts and metrics are summed over the data-parallel group
only, and token budgets (``*_max_token_len_per_gpu``) are multiplied by the group size (verl's convention: the
budget is per GPU, and a GPU holds ``1 / sp`` of a micro-batch's tokens).

    loss = pg_loss - entropy_coeff * entropy + kl_loss_coef * KL(pi || pi_ref)     (all via ``agg_loss``)

On-policy steps (one epoch, one mini-batch) may come without ``old_log_probs``: π_old is then the policy being
updated, before its only optimizer step, so ``old_log_probs = log_prob.detach()`` of the update's own forward pass
(verl does the same), and ``actor/entropy`` is measured in that pass too; the trainer skips its separate
``compute_log_prob`` pass for such steps (``actor.skip_old_log_prob_on_policy``).
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial

import torch
from torch import nn

from verl.protocol import DataProto
from verl.utils.device import current_device
from verl.utils.torch_functional import (
    entropy_from_logits,
    entropy_from_logits_with_chunking,
    sum_pi_squared_from_logits,
)
from verl.workers.actor.base import BasePPOActor
from verl.workers.actor.loss import (
    SUMMED_METRICS,
    actor_loss,
    mini_batches,
    needs_entropy,
    reduce_step_metrics,
    require_on_policy,
    update_keys,
)
from verl.workers.config import ActorConfig, RefConfig
from verl.workers.engine.fsdp.accumulation import accumulation, forward_only
from verl.workers.engine.fsdp.forward import forward_log_probs, head_rows_only
from verl.workers.engine.fsdp.head import check_fused_head_supported
from verl.workers.engine.fsdp.optim import clip_grad_norm_and_step
from verl.workers.engine.fsdp.ulysses import UlyssesMesh
from verl.workers.engine.micro_batches import (
    all_reduce_sum,
    dp_world_size,
    global_counts,
    plan_micro_batches,
    token_budget,
)
from verl.workers.engine.multimodal_inputs import (
    check_response_placeholders,
    micro_batch_multi_modal_inputs,
    with_row_index,
)
from verl.workers.rollout.sampling import vision_placeholder_ids

MODEL_INPUT_KEYS = ["responses", "input_ids", "attention_mask", "position_ids"]
MULTI_MODAL_KEY = "multi_modal_inputs"


def _tensor_batch(data: DataProto):
    """The tensor batch, with row indices when samples carry ``multi_modal_inputs`` (to find them per micro-batch)."""
    return with_row_index(data.batch) if MULTI_MODAL_KEY in data.non_tensor_batch else data.batch


class DataParallelPPOActor(BasePPOActor):
    """``config`` is an ``ActorConfig`` whose ``ppo_mini_batch_size`` is already per rank (in samples, i.e.
    multiplied by ``rollout.n`` and divided by the data-parallel size, as the worker does); the frozen reference
    policy passes its ``RefConfig`` and only computes log-probs. ``ulysses`` is the engine's ``(dp, sp)`` mesh
    (``FSDPEngine.ulysses``); ``None`` means no sequence parallelism.

    A recipe's loss subclasses it and overrides :meth:`_micro_batch_loss` (and :meth:`_update_keys`,
    :meth:`_global_counts`, ``SUMMED_METRICS`` when its loss reads other columns or normalises differently)."""

    SUMMED_METRICS = SUMMED_METRICS
    """Loss metrics that are micro-batch shares of the mini-batch value (summed over micro-batches and ranks)."""

    def __init__(
        self,
        config: ActorConfig | RefConfig,
        actor_module: nn.Module,
        actor_optimizer: torch.optim.Optimizer | None = None,
        use_remove_padding: bool = True,
        ulysses: UlyssesMesh | None = None,
        use_fused_kernels: bool = False,
        use_torch_compile: bool = False,
    ):
        super().__init__(config)
        self.actor_module = actor_module
        self.actor_optimizer = actor_optimizer
        self.use_remove_padding = use_remove_padding
        self.ulysses = ulysses if ulysses is not None and ulysses.enabled else None
        self.sp_size = self.ulysses.sp_size if self.ulysses is not None else 1
        self.dp_group = self.ulysses.dp_group if self.ulysses is not None else None  # None: every rank
        if self.ulysses is not None and not use_remove_padding:
            raise ValueError("ulysses_sequence_parallel_size > 1 needs actor_rollout_ref.model.use_remove_padding=True")
        self.use_fused_kernels = use_fused_kernels
        self.use_torch_compile = use_torch_compile
        if use_fused_kernels:
            check_fused_head_supported(actor_module)

    # ------------------------------------------------------------------ forward
    def output_layer_tokens(self, data: DataProto) -> int | None:
        """The positions that predict a response token (each row's last prompt token and its response tokens but
        the last column), where :func:`forward_log_probs` runs the output layer on those alone; else None."""
        if not head_rows_only(self.actor_module, self.use_remove_padding, self.ulysses):
            return None
        response_length = data.batch["responses"].shape[-1]
        return int(data.batch["attention_mask"][:, -response_length - 1 : -1].sum())

    def _check_placeholders(self, data: DataProto) -> None:
        """A multimodal batch whose responses hold an image/video placeholder id fails here, naming the row, instead
        of inside transformers' forward (:func:`check_response_placeholders`)."""
        if MULTI_MODAL_KEY not in data.non_tensor_batch:
            return
        responses = data.batch["responses"]
        config = getattr(self.actor_module, "config", None)
        response_mask = data.batch["attention_mask"][:, -responses.shape[-1] :]
        check_response_placeholders(responses, response_mask, vision_placeholder_ids(config))

    def _entropy_fn(self):
        """None: the entropy comes with the log-probs, a chunk of rows at a time, its backward recomputing each
        chunk (:mod:`verl.utils.chunked_logprobs`), which is what ``entropy_from_logits_with_chunking`` asks for.
        With ``entropy_checkpointing`` it is computed from the logits (in chunks when asked) and recomputed in the
        backward pass instead of storing its activations."""
        if not self.config.entropy_checkpointing:
            return None
        entropy_fn = entropy_from_logits_with_chunking if self.config.entropy_from_logits_with_chunking else None
        entropy_fn = entropy_fn or entropy_from_logits
        return lambda logits: torch.utils.checkpoint.checkpoint(entropy_fn, logits, use_reentrant=False)

    def _forward_micro_batch(
        self, micro_batch, temperature: float, calculate_entropy: bool, multi_modal_rows=None, stat_fn=None
    ):
        """``(log_probs (bs, R), entropy (bs, R) | None)`` for one micro-batch TensorDict; ``multi_modal_rows`` is
        the batch's ``multi_modal_inputs`` column (None for text); ``stat_fn`` replaces the entropy by another
        per-token statistic of the logits."""
        response_length = micro_batch["responses"].shape[-1]
        log_probs, entropy = forward_log_probs(
            self.actor_module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            temperature=temperature,
            calculate_entropy=calculate_entropy,
            use_remove_padding=self.use_remove_padding,
            entropy_fn=stat_fn or self._entropy_fn(),
            multi_modal_inputs=micro_batch_multi_modal_inputs(
                multi_modal_rows, micro_batch, micro_batch["input_ids"].device
            ),
            ulysses=self.ulysses,
            use_fused_kernels=self.use_fused_kernels,
            compiled=self.use_torch_compile,
            response_length=response_length,
        )
        # zero outside the response: the slot after a sequence's last token holds a cross-sequence label
        valid = micro_batch["attention_mask"][:, -response_length:].bool()
        log_probs = torch.where(valid, log_probs[:, -response_length - 1 : -1], 0.0)
        if entropy is not None:
            entropy = torch.where(valid, entropy[:, -response_length - 1 : -1], 0.0)
        return log_probs, entropy

    def compute_sum_pi_squared(self, data: DataProto) -> torch.Tensor:
        """``sum_v pi(v | s_t)^2`` ``(bs, R)`` at every response position (``actor.calculate_sum_pi_squared``, for the
        optimal-token-baseline estimator); micro-batched like :meth:`compute_log_prob`."""
        _, sum_pi_squared = self.compute_log_prob(data, calculate_entropy=True, stat_fn=sum_pi_squared_from_logits)
        return sum_pi_squared

    def compute_log_prob(self, data: DataProto, calculate_entropy: bool = False, stat_fn=None):
        """Log-probs ``(bs, R)`` of the responses; ``meta_info`` gives ``micro_batch_size``, ``temperature``,
        ``use_dynamic_bsz`` and ``max_token_len``. Returns ``(log_probs, entropys or None)`` (``stat_fn``: another
        per-token statistic instead of the entropy)."""
        self.actor_module.eval()
        meta = data.meta_info
        temperature = meta.get("temperature", 1.0)
        self._check_placeholders(data)
        data = data.select(batch_keys=MODEL_INPUT_KEYS)
        multi_modal_rows = data.non_tensor_batch.get(MULTI_MODAL_KEY)
        plan = plan_micro_batches(
            _tensor_batch(data),
            meta.get("micro_batch_size"),
            bool(meta.get("use_dynamic_bsz", False)),
            token_budget(meta.get("max_token_len"), self.sp_size),
        )
        log_probs, entropys = [], []
        with torch.no_grad(), forward_only(self.actor_module):
            for micro_batch in plan.micro_batches:
                micro_batch = micro_batch.to(current_device())
                log_prob, entropy = self._forward_micro_batch(
                    micro_batch, temperature, calculate_entropy, multi_modal_rows, stat_fn
                )
                log_probs.append(log_prob.cpu())
                if entropy is not None:
                    entropys.append(entropy.cpu())
        log_probs_all = plan.restore(torch.cat(log_probs))
        entropys_all = plan.restore(torch.cat(entropys)) if calculate_entropy else None
        return log_probs_all, entropys_all

    # ------------------------------------------------------------------ update
    def _mini_batches(self, data: DataProto, epoch: int) -> list[DataProto]:
        return mini_batches(self.config, data, epoch)

    def _micro_batch_loss(self, micro_batch, temperature: float, counts: tuple[float, float], multi_modal_rows=None):
        """The micro-batch's share of the mini-batch loss, and its metrics (without ``old_log_probs``, on-policy:
        the entropy is measured too, for ``actor/entropy``)."""
        log_prob, entropy = self._forward_micro_batch(
            micro_batch, temperature, needs_entropy(self.config, micro_batch), multi_modal_rows
        )
        return actor_loss(self.config, log_prob, entropy, micro_batch, counts)

    def _update_keys(self, data: DataProto) -> list[str]:
        """Batch columns the update reads; without ``old_log_probs`` the PPO loss takes them from its own forward
        pass, which only an on-policy step allows (a recipe loss that reads no ``old_log_probs`` overrides this)."""
        if "old_log_probs" not in data.batch.keys():
            require_on_policy(self.config, data)
        return update_keys(self.config, data, MODEL_INPUT_KEYS)

    def _global_counts(self, mini_batch: DataProto) -> tuple[float, float]:
        """``(tokens, sequences)`` of the mini-batch over the data-parallel group, the denominators of ``agg_loss``."""
        return global_counts(mini_batch.batch["response_mask"], self.dp_group)

    def update_policy(self, data: DataProto) -> dict[str, list[float]]:
        """``ppo_epochs`` × mini-batches × micro-batches with gradient accumulation; one optimizer step per
        mini-batch. Loss metrics are the whole mini-batch's values (summed shares over micro-batches and
        ranks); ratio metrics (clip fractions, ppo_kl) are averaged over micro-batches."""
        if self.actor_optimizer is None:
            raise RuntimeError("update_policy needs an optimizer; build the actor with actor_optimizer")
        config = self.config
        self.actor_module.train()
        temperature = data.meta_info.get("temperature", 1.0)
        self._check_placeholders(data)
        data = data.select(
            batch_keys=self._update_keys(data),
            non_tensor_batch_keys=[MULTI_MODAL_KEY] if MULTI_MODAL_KEY in data.non_tensor_batch else [],
        )
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
                    token_budget(config.ppo_max_token_len_per_gpu, self.sp_size),
                )
                self.actor_optimizer.zero_grad(set_to_none=True)
                step_metrics: dict[str, list[float]] = defaultdict(list)
                with accumulation(self.actor_module, plan.micro_batches) as micro_batches:
                    for micro_batch in micro_batches:
                        micro_batch = micro_batch.to(current_device())
                        loss, micro_metrics = self._micro_batch_loss(micro_batch, temperature, counts, multi_modal_rows)
                        (loss * world).backward()
                        for name, value in micro_metrics.items():
                            step_metrics[name].append(value)
                grad_norm = clip_grad_norm_and_step(self.actor_module, self.actor_optimizer, config.grad_clip)
                reduce = partial(all_reduce_sum, group=self.dp_group)
                for name, value in reduce_step_metrics(step_metrics, reduce, self.SUMMED_METRICS).items():
                    metrics[name].append(value)
                metrics["actor/grad_norm"].append(grad_norm)
        self.actor_optimizer.zero_grad(set_to_none=True)
        return dict(metrics)
