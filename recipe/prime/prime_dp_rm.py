"""The implicit PRM on the FSDP2 engine: token rewards ``β log(π_φ/π_ref)`` and their online outcome update.

``DataParallelPRIMERewardModel`` holds two engines: π_φ (trained, with its optimizer) and the frozen π_ref. Every
rank scores its share of the batch; ``prime_norm: batch_norm`` divides by the largest absolute return-to-go over
all ranks. The cross-entropy update follows the actor's conventions: ``mini_batch_size`` prompts (times
``rollout.n`` sequences) per optimizer step over all ranks, micro-batches by rows or token budget, each micro-batch
loss its share of the mini-batch mean (summed by gradient accumulation, averaged over ranks by FSDP).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from recipe.prime.prime_core_algos import batch_norm_scale, implicit_process_rewards
from verl.protocol import DataProto
from verl.utils.device import current_device
from verl.workers.actor.role_utils import per_rank_mini_batch_size, with_fields
from verl.workers.engine.fsdp.forward import forward_log_probs
from verl.workers.engine.micro_batches import all_reduce_sum, dp_world_size, plan_micro_batches
from verl.workers.engine.registry import get_engine_cls

INPUT_KEYS = ["responses", "input_ids", "attention_mask", "position_ids"]

__all__ = ["DataParallelPRIMERewardModel"]


class DataParallelPRIMERewardModel:
    """π_φ and π_ref of ``reward_model`` (a ``PrimeRewardModelConfig``), scoring and trained on ``acc``."""

    def __init__(self, config: Any, rollout_n: int, actor_mini_batch_size: int):
        self.config = config
        model = config.model
        optim = with_fields(model.optim, clip_grad=model.optim.grad_clip)
        engine_cls = get_engine_cls(config.strategy)
        self.engine = engine_cls(model, model.fsdp_config, optim, role="actor").initialize()
        ref_model = with_fields(model, path=model.ref_path or model.path, lora_rank=0)
        self.ref_engine = engine_cls(ref_model, model.fsdp_config, None, role="ref").initialize()
        prompts = config.mini_batch_size or actor_mini_batch_size
        self.mini_batch_size = per_rank_mini_batch_size(
            with_fields(config, ppo_mini_batch_size=prompts), rollout_n, self.engine.dp_size, "reward_model"
        )
        self.use_remove_padding = bool(model.use_remove_padding)
        self.engine.offload_optimizer()

    # ------------------------------------------------------------------ forward

    def _log_probs(self, module, micro_batch) -> torch.Tensor:
        """``(bs, R)`` log-probs of the response tokens under ``module`` (0 on padding)."""
        response_length = micro_batch["responses"].shape[-1]
        log_probs, _ = forward_log_probs(
            module,
            micro_batch["input_ids"],
            micro_batch["attention_mask"],
            micro_batch["position_ids"],
            use_remove_padding=self.use_remove_padding,
        )
        valid = micro_batch["attention_mask"][:, -response_length:].bool()
        return torch.where(valid, log_probs[:, -response_length - 1 : -1], 0.0)

    def _log_ratio(self, micro_batch) -> torch.Tensor:
        """``q (bs, R) = log π_φ - log π_ref`` of the response tokens; differentiable in π_φ in train mode."""
        with torch.no_grad():
            ref_log_probs = self._log_probs(self.ref_engine.forward_module, micro_batch)
        return self._log_probs(self.engine.forward_module, micro_batch) - ref_log_probs

    def _token_rewards(self, q: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
        return implicit_process_rewards(
            q.detach(), response_mask, self.config.model.beta_train, self.config.prime_granularity
        )

    def _normalize(self, scores: torch.Tensor) -> torch.Tensor:
        """``prime_norm``: divide by the largest absolute return-to-go over every rank's share."""
        if self.config.prime_norm != "batch_norm":
            return scores
        scale = batch_norm_scale(scores).to(current_device())
        if dp_world_size() > 1:
            dist.all_reduce(scale, op=dist.ReduceOp.MAX)
        return scores / (scale.cpu() + 1e-6)

    def _plan(self, batch, max_tokens: int):
        return plan_micro_batches(
            batch, self.config.micro_batch_size_per_gpu, bool(self.config.use_dynamic_bsz), max_tokens
        )

    # ------------------------------------------------------------------ scoring

    def compute_rm_score(self, data: DataProto) -> tuple[torch.Tensor, dict[str, float]]:
        """``rm_scores (bs, R)``: the normalized implicit token rewards of this rank's rows."""
        self.engine.eval_mode()
        batch = data.select(batch_keys=INPUT_KEYS).batch
        response_mask = batch["attention_mask"][:, -batch["responses"].shape[-1] :]
        plan = self._plan(batch, self.config.ppo_max_token_len_per_gpu)
        log_ratios = []
        with torch.no_grad():
            for micro_batch in plan.micro_batches:
                log_ratios.append(self._log_ratio(micro_batch.to(current_device())).cpu())
        q = plan.restore(torch.cat(log_ratios))
        scores = self._normalize(self._token_rewards(q, response_mask))
        metrics = {
            "reward_model/reward": all_reduce_sum(scores.sum()) / all_reduce_sum(len(scores)),
            "reward_model/raw_reward": all_reduce_sum(q.sum()) / all_reduce_sum(len(q)),
        }
        return scores, metrics

    # ------------------------------------------------------------------ update

    def update_rm(self, data: DataProto) -> tuple[torch.Tensor, dict[str, list[float]]]:
        """One pass of cross-entropy updates over this rank's rows (``mini_batch_size`` per optimizer step).

        Returns the rows' implicit rewards as computed by each mini-batch's forward, before its optimizer step
        (what ``update: after`` trains on), normalized; and the metrics per optimizer step.
        """
        beta = self.config.model.beta_train
        self.engine.load_optimizer()
        self.engine.train_mode()
        data = data.select(batch_keys=INPUT_KEYS + ["acc"])
        if len(data) % self.mini_batch_size:
            raise ValueError(
                f"per-rank batch of {len(data)} rows is not divisible by the PRM's per-rank mini-batch "
                f"{self.mini_batch_size}; adjust reward_model.mini_batch_size / data.train_batch_size"
            )
        scores, metrics = [], defaultdict(list)
        world = dp_world_size()
        for mini_batch in data.split(self.mini_batch_size):
            rows = all_reduce_sum(len(mini_batch))
            plan = self._plan(mini_batch.batch, self.config.ppo_max_token_len_per_gpu)
            self.engine.zero_grad()
            mini_scores, loss_sum = [], 0.0
            for micro_batch in plan.micro_batches:
                micro_batch = micro_batch.to(current_device())
                response_mask = micro_batch["attention_mask"][:, -micro_batch["responses"].shape[-1] :]
                q = self._log_ratio(micro_batch)
                logits = beta * (q * response_mask).sum(-1)
                loss = F.binary_cross_entropy_with_logits(logits, micro_batch["acc"].to(logits.dtype), reduction="sum")
                (loss / rows * world).backward()
                loss_sum += float(loss.detach())
                mini_scores.append(self._token_rewards(q, response_mask).cpu())
            grad_norm = self.engine.clip_and_step()
            self.engine.load_optimizer()  # clip_and_step offloads it again; more mini-batches follow
            scores.append(plan.restore(torch.cat(mini_scores)))
            metrics["reward_model/dpo_loss"].append(all_reduce_sum(loss_sum) / rows)
            metrics["reward_model/grad_norm"].append(grad_norm)
        self.engine.zero_grad()
        self.engine.offload_optimizer()
        metrics["reward_model/lr"].append(self.engine.lr_scheduler_step())
        return self._normalize(torch.cat(scores)), dict(metrics)
