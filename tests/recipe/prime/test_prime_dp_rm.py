"""The implicit PRM on FSDP2 over 2 gloo ranks against plain single-process PyTorch: its token rewards are
``beta * (log pi_phi - log pi_ref)`` (batch-normalised), and its update's loss and gradient norm are PRIME's
cross-entropy on the outcome."""

from __future__ import annotations

import math

import pytest
import torch

from recipe.prime.config import PrimeRewardModelConfig, PrimeRewardModelModelConfig
from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rank_share, rollout_batch, run_on_ranks

BETA, BATCH, N = 0.5, 8, 2


def _config(rm_path: str, ref_path: str) -> PrimeRewardModelConfig:
    model = PrimeRewardModelModelConfig(path=rm_path, ref_path=ref_path, beta_train=BETA, use_remove_padding=True)
    model.optim.lr = 1e-3
    # 8 rows = 4 prompts x 2 responses, one optimizer step; micro-batches of 2 rows
    return PrimeRewardModelConfig(model=model, mini_batch_size=BATCH // N, micro_batch_size_per_gpu=2)


def _sequence_log_probs(model, batch, row: int) -> torch.Tensor:
    valid = batch["attention_mask"][row].bool()
    ids = batch["input_ids"][row][valid]
    n_resp = int(batch["response_mask"][row].sum())
    log_probs = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), -1)
    return log_probs.gather(-1, ids[1:, None])[:, 0][-n_resp:]


def _reference(rm_path: str, ref_path: str, batch):
    """Per-row token log-ratios q, the normalised token rewards, the BCE loss and its gradient norm."""
    from transformers import AutoModelForCausalLM

    rm = AutoModelForCausalLM.from_pretrained(rm_path, dtype=torch.float32)
    ref = AutoModelForCausalLM.from_pretrained(ref_path, dtype=torch.float32)
    rewards = torch.zeros(batch["responses"].shape)
    logits = []
    for row in range(BATCH):
        with torch.no_grad():
            ref_lp = _sequence_log_probs(ref, batch, row)
        q = _sequence_log_probs(rm, batch, row) - ref_lp
        logits.append(BETA * q.sum())
        rewards[row, : len(q) - 1] = BETA * q.detach()[:-1]  # every response token but the last
    returns_to_go = rewards.flip(-1).cumsum(-1).flip(-1)
    rewards = rewards / (returns_to_go.abs().max() + 1e-6)
    acc = batch["acc"]
    loss = torch.stack(
        [-(a * torch.log(torch.sigmoid(z)) + (1 - a) * torch.log(1 - torch.sigmoid(z))) for z, a in zip(logits, acc)]
    ).mean()
    loss.backward()
    norm = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in rm.parameters() if p.grad is not None))
    return rewards, float(loss.detach()), norm


def _rm_rank(rank, world, config, batch):
    from recipe.prime.prime_dp_rm import DataParallelPRIMERewardModel

    rm = DataParallelPRIMERewardModel(config, rollout_n=N, actor_mini_batch_size=BATCH // N)
    share = rank_share(batch, rank, world)
    scores, _ = rm.compute_rm_score(share)
    update_scores, metrics = rm.update_rm(share)
    return scores, update_scores, metrics


@pytest.mark.slow
def test_prm_scores_and_update_match_plain_reference():
    rm_path, ref_path = tiny_model_path("llama", seed=0), tiny_model_path("llama", seed=1)
    batch = rollout_batch(batch_size=BATCH, seed=7)
    batch["acc"] = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    expected_rewards, expected_loss, expected_norm = _reference(rm_path, ref_path, batch)
    results = run_on_ranks(_rm_rank, 2, _config(rm_path, ref_path), batch)
    scores = torch.cat([r[0] for r in results])
    torch.testing.assert_close(scores, expected_rewards, atol=2e-5, rtol=1e-4)
    # the update's own forward runs before its optimizer step: the same rewards
    torch.testing.assert_close(torch.cat([r[1] for r in results]), expected_rewards, atol=2e-5, rtol=1e-4)
    metrics = results[0][2]
    assert metrics["reward_model/dpo_loss"][0] == pytest.approx(expected_loss, rel=1e-4)
    assert metrics["reward_model/grad_norm"][0] == pytest.approx(expected_norm, rel=1e-3)
    assert metrics["reward_model/lr"] == [pytest.approx(1e-3)]
