"""DistillActor on FSDP2 over 2 gloo ranks: its loss and gradient norm equal the token-mean reverse KL to a
teacher's top-k written out in plain PyTorch, and the teacher worker's top-k equal the teacher's own."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rank_share, rollout_batch, run_on_ranks

BATCH, TOPK = 8, 5


def _plain_response_log_probs(model, batch, row: int) -> torch.Tensor:
    """``(n_resp, V)`` next-token log-probs at the response positions of one row, no padding at all."""
    valid = batch["attention_mask"][row].bool()
    ids = batch["input_ids"][row][valid]
    n_resp = int(batch["response_mask"][row].sum())
    return torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), -1)[-n_resp:]


def _teacher_topk(teacher_path: str, batch):
    from transformers import AutoModelForCausalLM

    teacher = AutoModelForCausalLM.from_pretrained(teacher_path, dtype=torch.float32)
    shape = (*batch["responses"].shape, TOPK)
    values, indices = torch.zeros(shape), torch.zeros(shape, dtype=torch.long)
    with torch.no_grad():
        for row in range(BATCH):
            top = torch.topk(_plain_response_log_probs(teacher, batch, row), TOPK, dim=-1)
            values[row, : len(top.values)], indices[row, : len(top.values)] = top.values, top.indices
    return values, indices


def _reference(student_path: str, batch) -> tuple[float, float]:
    """Token-mean over all response tokens of KL(Q || P) on the teacher's top-k, both renormalised."""
    from transformers import AutoModelForCausalLM

    student = AutoModelForCausalLM.from_pretrained(student_path, dtype=torch.float32)
    total, tokens = 0.0, int(batch["response_mask"].sum())
    for row in range(BATCH):
        log_q_full = _plain_response_log_probs(student, batch, row)
        n = log_q_full.shape[0]
        p = torch.softmax(batch["teacher_topk_log_probs"][row, :n], -1)
        q = torch.softmax(log_q_full.gather(-1, batch["teacher_topk_indices"][row, :n]), -1)
        total = total + (q * (q.log() - p.log())).sum()
    loss = total / tokens
    loss.backward()
    norm = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in student.parameters() if p.grad is not None))
    return float(loss.detach()), norm


def _distill_rank(rank, world, path, batch):
    from recipe.gkd.distill_actor import DistillActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    optim = OptimConfig(lr=1e-3)
    config = FSDPActorConfig(ppo_mini_batch_size=BATCH // world, ppo_micro_batch_size_per_gpu=2, optim=optim)
    engine = FSDPEngine(
        HFModelConfig(path=path, enable_gradient_checkpointing=False), FSDPEngineConfig(), optim
    ).initialize()
    distill = SimpleNamespace(loss_type="reverse_kl", beta=0.5, loss_coef=1.0)
    actor = DistillActor(config, engine.module, engine.optimizer, distill)
    return actor.update_policy(rank_share(batch, rank, world))


def _teacher_rank(rank, world, path, batch):
    from recipe.gkd.teacher import teacher_topk
    from verl.workers.config import FSDPEngineConfig, HFModelConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    engine = FSDPEngine(HFModelConfig(path=path), FSDPEngineConfig(), None, role="ref").initialize()
    share = rank_share(batch, rank, world).batch
    return teacher_topk(engine.forward_module, share, 1.0, TOPK)


@pytest.mark.slow
def test_teacher_topk_and_student_update_match_plain_references():
    student_path, teacher_path = tiny_model_path("llama", seed=0), tiny_model_path("llama", seed=1)
    batch = rollout_batch(batch_size=BATCH, seed=5)
    values, indices = _teacher_topk(teacher_path, batch)
    mask = batch["response_mask"].bool()
    shares = run_on_ranks(_teacher_rank, 2, teacher_path, batch)
    worker_values = torch.cat([share[0] for share in shares])
    worker_indices = torch.cat([share[1] for share in shares])
    torch.testing.assert_close(worker_values[mask], values[mask], atol=2e-5, rtol=1e-5)
    assert torch.equal(worker_indices[mask][:, 0], indices[mask][:, 0])  # the argmax is unambiguous
    batch["teacher_topk_log_probs"], batch["teacher_topk_indices"] = values, indices
    expected_loss, expected_norm = _reference(student_path, batch)
    metrics = run_on_ranks(_distill_rank, 2, student_path, batch)[0]
    assert metrics["actor/distill_loss"][0] == pytest.approx(expected_loss, rel=1e-4)
    assert metrics["actor/grad_norm"][0] == pytest.approx(expected_norm, rel=1e-3)
