"""The frozen teacher as a worker group: top-k next-token log-probs at every response position of the student's
samples (on the actor's devices, or on its own pool with ``trainer.placement.roles.teacher``)."""

from __future__ import annotations

import torch

from recipe.gkd.distill_actor import response_logits
from verl.protocol import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils.device import current_device, get_nccl_backend
from verl.workers.actor.role_utils import with_fields
from verl.workers.engine.micro_batches import plan_micro_batches
from verl.workers.engine.registry import get_engine_cls
from verl.workers.fsdp_workers import load_tokenizer

__all__ = ["TeacherWorker", "teacher_topk"]

TEACHER_MESH = "teacher"
"""Dispatch mesh of the teacher group (every rank is one data-parallel rank)."""


@torch.no_grad()
def teacher_topk(module, micro_batch, temperature: float, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log_probs, indices)``, each ``(bs, R, k)``: the teacher's k most likely next tokens at each response
    position and their log-probs under its tempered distribution (``k`` capped at the vocabulary size)."""
    log_probs = torch.log_softmax(response_logits(module, micro_batch, temperature), dim=-1)
    values, indices = torch.topk(log_probs, min(topk, log_probs.shape[-1]), dim=-1)
    return values, indices


class TeacherWorker(Worker):
    """``config`` is the whole GKD config; the teacher is ``actor_rollout_ref.teacher``."""

    def __init__(self, config):
        super().__init__()
        self.teacher_config = config.actor_rollout_ref.teacher
        self.student_model = config.actor_rollout_ref.model
        self.temperature = float(config.actor_rollout_ref.rollout.temperature)
        self.init_process_group(backend=get_nccl_backend())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        teacher = self.teacher_config
        student_vocab = len(load_tokenizer(self.student_model))
        teacher_vocab = len(load_tokenizer(teacher.model))
        if student_vocab != teacher_vocab:
            raise ValueError(
                f"actor_rollout_ref.teacher.model.path={teacher.model.path!r} has a vocabulary of {teacher_vocab} "
                f"tokens, the student {self.student_model.path!r} {student_vocab}: on-policy distillation compares "
                "distributions token by token, so both must share the tokenizer"
            )
        self._register_dispatch_collect_info(TEACHER_MESH, dp_rank=self.rank, is_collect=True)
        model = with_fields(teacher.model, lora_rank=0)
        self.engine = get_engine_cls(teacher.strategy)(model, teacher.fsdp_config, None, role="ref").initialize()
        self.engine.eval_mode()

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name=TEACHER_MESH))
    def compute_teacher_topk(self, data: DataProto) -> DataProto:
        """``teacher_topk_log_probs`` (float) and ``teacher_topk_indices`` (long), each ``(bs, R, k)``."""
        teacher = self.teacher_config
        batch = data.select(batch_keys=["responses", "input_ids", "attention_mask", "position_ids"]).batch
        plan = plan_micro_batches(
            batch,
            teacher.log_prob_micro_batch_size_per_gpu,
            teacher.log_prob_use_dynamic_bsz,
            teacher.log_prob_max_token_len_per_gpu,
        )
        values, indices = [], []
        for micro_batch in plan.micro_batches:
            top_values, top_indices = teacher_topk(
                self.engine.forward_module, micro_batch.to(current_device()), self.temperature, teacher.topk
            )
            values.append(top_values.cpu())
            indices.append(top_indices.cpu())
        return DataProto.from_dict(
            tensors={
                "teacher_topk_log_probs": plan.restore(torch.cat(values)),
                "teacher_topk_indices": plan.restore(torch.cat(indices)),
            }
        )
