"""The student's update: token-level divergence to the teacher on the student's own samples.

``DistillActor`` is :class:`~verl.workers.actor.dp_actor.DataParallelPPOActor` with the PPO surrogate replaced by
``loss_coef · agg(D(P_teacher, Q_student))`` (``recipe.gkd.distill_losses``, over the teacher's top-k tokens per
position); mini/micro-batching, gradient accumulation and the data-parallel scaling are the PPO actor's.
"""

from __future__ import annotations

import torch

from recipe.gkd.distill_losses import token_distill_loss
from verl.models.transformers.qwen2_vl import padded_model_position_ids
from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import agg_loss
from verl.utils.torch_functional import entropy_from_logits
from verl.workers.actor.dp_actor import MODEL_INPUT_KEYS, DataParallelPPOActor
from verl.workers.engine.fsdp.forward import keeps_logit_rows

TEACHER_KEYS = ["teacher_topk_log_probs", "teacher_topk_indices"]

__all__ = ["DistillActor", "TEACHER_KEYS", "response_logits"]


def response_logits(module, micro_batch, temperature: float) -> torch.Tensor:
    """``(bs, R, V)`` tempered logits predicting each response token (padded forward; the output layer runs on the
    last ``R + 1`` columns alone where the model takes ``logits_to_keep``)."""
    response_length = micro_batch["responses"].shape[-1]
    keep = {"logits_to_keep": response_length + 1} if keeps_logit_rows(module) else {}
    logits = module(
        input_ids=micro_batch["input_ids"],
        attention_mask=micro_batch["attention_mask"],
        position_ids=padded_model_position_ids(micro_batch["position_ids"]),
        use_cache=False,
        **keep,
    ).logits
    return logits[:, -response_length - 1 : -1].float() / temperature


class DistillActor(DataParallelPPOActor):
    """The student; ``distill`` is the ``actor_rollout_ref.actor.distill`` config (``loss_type``, ``beta``,
    ``loss_coef``)."""

    SUMMED_METRICS = frozenset({"actor/distill_loss", "actor/entropy"})

    def __init__(self, config, actor_module, actor_optimizer, distill, use_remove_padding: bool = True):
        super().__init__(config, actor_module, actor_optimizer, use_remove_padding)
        self.distill = distill

    def _update_keys(self, data: DataProto) -> list[str]:
        return MODEL_INPUT_KEYS + ["response_mask"] + TEACHER_KEYS

    def _micro_batch_loss(self, micro_batch, temperature, counts, multi_modal_rows=None):
        """The micro-batch's share of ``loss_coef · agg(D)`` over the mini-batch, and its metrics."""
        num_tokens, num_seqs = counts
        agg = dict(loss_agg_mode=self.config.loss_agg_mode, global_num_tokens=num_tokens, global_num_seqs=num_seqs)
        response_mask = micro_batch["response_mask"].float()
        logits = response_logits(self.actor_module, micro_batch, temperature)
        log_probs = torch.log_softmax(logits, dim=-1)
        student_topk = log_probs.gather(-1, micro_batch["teacher_topk_indices"].long())
        divergence = token_distill_loss(
            self.distill.loss_type, micro_batch["teacher_topk_log_probs"], student_topk, self.distill.beta
        )
        distill_loss = agg_loss(divergence, response_mask, **agg)
        with torch.no_grad():
            entropy = agg_loss(entropy_from_logits(logits), response_mask, **agg)
        metrics = {"actor/distill_loss": float(distill_loss.detach()), "actor/entropy": float(entropy)}
        return self.distill.loss_coef * distill_loss, metrics
