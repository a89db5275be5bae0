"""SPINActor on FSDP2 over 2 gloo ranks, 2-row micro-batches: its loss and gradient norm equal SPIN's loss written
out over whole sequences in plain PyTorch."""

from __future__ import annotations

import math

import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rank_share, rollout_batch, run_on_ranks

BETA, BATCH = 0.5, 8  # 4 (chosen, rejected) pairs


def _batch() -> dict[str, torch.Tensor]:
    batch = rollout_batch(batch_size=BATCH, seed=3)
    gen = torch.Generator().manual_seed(4)
    batch["ref_log_prob"] = (-7.0 + 0.5 * torch.randn(batch["response_mask"].shape, generator=gen)) * batch[
        "response_mask"
    ]
    return batch


def _reference(path: str, batch) -> tuple[float, float]:
    """SPIN's loss (mean over pairs of log(1 + exp(-beta h))) and the gradient norm of one plain HF model."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    totals = []
    for row in range(BATCH):
        valid = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][valid]
        n_resp = int(batch["response_mask"][row].sum())
        log_probs = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), -1)
        totals.append(log_probs.gather(-1, ids[1:, None])[:, 0][-n_resp:].sum())
    policy = torch.stack(totals)
    reference = batch["ref_log_prob"].sum(-1)
    losses = []
    for pair in range(BATCH // 2):
        h = (policy[2 * pair] - reference[2 * pair]) - (policy[2 * pair + 1] - reference[2 * pair + 1])
        losses.append(torch.log1p(torch.exp(-BETA * h)))
    loss = torch.stack(losses).mean()
    loss.backward()
    norm = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None))
    return float(loss.detach()), norm


def _spin_rank(rank, world, path, batch):
    from types import SimpleNamespace

    from recipe.spin.dp_actor import SPINActor
    from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, HFModelConfig, OptimConfig
    from verl.workers.engine.fsdp.engine import FSDPEngine

    optim = OptimConfig(lr=1e-3)
    config = FSDPActorConfig(ppo_mini_batch_size=BATCH // world, ppo_micro_batch_size_per_gpu=2, optim=optim)
    engine = FSDPEngine(
        HFModelConfig(path=path, use_remove_padding=True, enable_gradient_checkpointing=False),
        FSDPEngineConfig(),
        optim,
    ).initialize()
    spin = SimpleNamespace(dpo_beta=BETA, dpo_label_smoothing=0.0, dpo_loss_type="sigmoid")
    actor = SPINActor(config, engine.module, engine.optimizer, spin, use_remove_padding=True)
    return actor.update_policy(rank_share(batch, rank, world))


@pytest.mark.slow
def test_spin_update_matches_plain_reference():
    path = tiny_model_path("llama")
    batch = _batch()
    expected_loss, expected_norm = _reference(path, batch)
    metrics = run_on_ranks(_spin_rank, 2, path, batch)[0]
    assert metrics["actor/dpo_loss"][0] == pytest.approx(expected_loss, rel=1e-4)
    assert metrics["actor/grad_norm"][0] == pytest.approx(expected_norm, rel=1e-3)
