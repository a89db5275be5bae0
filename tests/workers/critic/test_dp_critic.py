"""DataParallelPPOCritic on 2 gloo ranks: values equal a plain HF token-classification forward of each sequence
(right shape, zero outside the response), and the clipped value loss / clip fraction of ``update_critic``
equal a float64 hand computation from those values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.models import tiny_model_path
from tests.workers.engine.fsdp.distributed import rank_share, rollout_batch, run_on_ranks

BATCH, CLIP_VALUE = 8, 0.05


def _critic_rank(rank, world, model_path, batch):
    from verl.workers.config import CriticConfig, CriticModelConfig, OptimConfig
    from verl.workers.critic import DataParallelPPOCritic
    from verl.workers.engine.fsdp.engine import FSDPEngine

    optim = OptimConfig(lr=1e-3)
    model_config = CriticModelConfig(path=model_path, use_remove_padding=True)
    config = CriticConfig(
        model=model_config,
        optim=optim,
        ppo_mini_batch_size=BATCH // world,
        ppo_micro_batch_size_per_gpu=3,
        cliprange_value=CLIP_VALUE,
    )
    engine = FSDPEngine(model_config, model_config.fsdp_config, optim, role="critic").initialize()
    critic = DataParallelPPOCritic(config, engine.module, engine.optimizer, use_remove_padding=True)
    weights = dict(engine.iter_full_state_dict())
    data = rank_share(batch, rank, world, {"micro_batch_size": 3})
    values = critic.compute_values(data)
    metrics = critic.update_critic(data)
    return {"values": values, "metrics": metrics, "weights": weights if rank == 0 else None}


def test_values_and_clipped_value_loss():
    from transformers import AutoModelForTokenClassification

    path = tiny_model_path("qwen2")
    batch = rollout_batch(batch_size=BATCH, seed=3)
    mask = batch["response_mask"].float()
    gen = torch.Generator().manual_seed(5)
    batch["values"] = 0.1 * torch.randn(mask.shape, generator=gen) * mask
    batch["returns"] = torch.randn(mask.shape, generator=gen) * mask
    results = run_on_ranks(_critic_rank, 2, path, batch)

    values = torch.cat([r["values"] for r in results])
    assert values.shape == batch["responses"].shape
    assert torch.all(values[mask == 0] == 0)

    # independent reference: the same weights in a plain single-process HF model, one sequence at a time
    model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    model.load_state_dict(results[0]["weights"])
    expected = torch.zeros(mask.shape)
    with torch.no_grad():
        for row in range(BATCH):
            valid = batch["attention_mask"][row].bool()
            ids = batch["input_ids"][row][valid]
            n = int(mask[row].sum())
            scores = model(input_ids=ids[None]).logits[0, :, 0]
            expected[row, :n] = scores[len(ids) - 1 - n : len(ids) - 1]
    torch.testing.assert_close(values, expected, atol=1e-5, rtol=1e-5)

    v = expected.double().numpy()
    old = batch["values"].double().numpy()
    ret = batch["returns"].double().numpy()
    m = mask.double().numpy()
    clipped = old + np.clip(v - old, -CLIP_VALUE, CLIP_VALUE)
    per_token = np.maximum((v - ret) ** 2, (clipped - ret) ** 2)
    vf_loss = 0.5 * (per_token * m).sum() / m.sum()
    clipfrac = (((clipped - ret) ** 2 > (v - ret) ** 2) * m).sum() / m.sum()
    metrics = results[0]["metrics"]
    assert 0 < clipfrac < 1  # both branches are exercised
    assert metrics["critic/vf_loss"][0] == pytest.approx(vf_loss, rel=1e-5)
    assert metrics["critic/vf_clipfrac"][0] == pytest.approx(clipfrac, abs=1e-6)
    assert metrics["critic/vpred_mean"][0] == pytest.approx((v * m).sum() / m.sum(), rel=1e-4, abs=1e-6)
    assert metrics["critic/grad_norm"][0] > 0
