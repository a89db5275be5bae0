"""SPIN's actor update: the PPO actor's batching with the self-play (DPO-style) pair loss.

Rows come in pairs, ``[chosen_0, rejected_0, chosen_1, rejected_1, ...]`` (the trainer interleaves them; fixed-size
micro-batches of an even size keep every pair together). A micro-batch's loss is its pairs' summed loss divided by
the mini-batch's pairs over all ranks, so gradient accumulation and data parallelism give the mini-batch mean.
"""

from __future__ import annotations

import torch

from recipe.spin.core_algos import compute_online_dpo_loss, sequence_log_probs
from verl.protocol import DataProto
from verl.workers.actor.dp_actor import MODEL_INPUT_KEYS, DataParallelPPOActor
from verl.workers.engine.micro_batches import all_reduce_sum

__all__ = ["SPINActor"]


class SPINActor(DataParallelPPOActor):
    """``spin`` holds ``dpo_beta``, ``dpo_loss_type`` and ``dpo_label_smoothing`` (the ``algorithm`` section)."""

    SUMMED_METRICS = frozenset({"actor/dpo_loss"})

    def __init__(self, config, actor_module, actor_optimizer, spin, use_remove_padding: bool = True, ulysses=None):
        super().__init__(config, actor_module, actor_optimizer, use_remove_padding, ulysses)
        self.spin = spin

    def _update_keys(self, data: DataProto) -> list[str]:
        return MODEL_INPUT_KEYS + ["response_mask", "ref_log_prob"]

    def _global_counts(self, mini_batch: DataProto) -> tuple[float, float]:
        """``(tokens, pairs)`` over all ranks (every row counts, an empty sample too)."""
        tokens = all_reduce_sum(mini_batch.batch["response_mask"].sum(), group=self.dp_group)
        return tokens, all_reduce_sum(len(mini_batch), group=self.dp_group) / 2

    def _micro_batch_loss(self, micro_batch, temperature, counts, multi_modal_rows=None):
        if micro_batch["input_ids"].shape[0] % 2:
            raise ValueError(
                "SPIN micro-batches must hold whole (chosen, rejected) pairs: use an even micro-batch size"
            )
        _, num_pairs = counts
        log_prob, _ = self._forward_micro_batch(micro_batch, temperature, False, multi_modal_rows)
        response_mask = micro_batch["response_mask"].to(log_prob.dtype)
        policy = sequence_log_probs(log_prob, response_mask)
        reference = sequence_log_probs(micro_batch["ref_log_prob"], response_mask)
        losses = compute_online_dpo_loss(
            policy[0::2],
            policy[1::2],
            reference[0::2],
            reference[1::2],
            beta=self.spin.dpo_beta,
            label_smoothing=self.spin.dpo_label_smoothing,
            loss_type=self.spin.dpo_loss_type,
        )
        loss = losses.sum() / num_pairs
        with torch.no_grad():
            chosen_rewards = self.spin.dpo_beta * (policy[0::2] - reference[0::2])
            rejected_rewards = self.spin.dpo_beta * (policy[1::2] - reference[1::2])
        metrics = {
            "actor/dpo_loss": float(loss.detach()),
            "actor/rewards_chosen": float(chosen_rewards.mean()),
            "actor/rewards_rejected": float(rejected_rewards.mean()),
            "actor/reward_accuracy": float((chosen_rewards > rejected_rewards).float().mean()),
            "actor/reward_margin": float((chosen_rewards - rejected_rewards).mean()),
        }
        return loss, metrics
