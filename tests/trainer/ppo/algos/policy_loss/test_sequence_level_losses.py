"""GSPO and GMPO (geo_mean): losses built on a per-sequence ratio."""

import numpy as np
import pytest
import torch

from tests.trainer.ppo.algos.policy_loss.test_vanilla import random_policy_inputs
from tests.trainer.ppo.algos.reference import actor_config, aggregate
from verl.trainer.ppo.core_algos import compute_policy_loss_geo_mean, compute_policy_loss_gspo


def test_gspo_matches_reference_value_and_gradient():
    batch, old, new, adv = random_policy_inputs(seed=30)
    new = old + (new - old) * 0.3
    config = actor_config(clip_ratio_low=0.1, clip_ratio_high=0.15)
    log_prob = torch.tensor(new, requires_grad=True)
    loss, metrics = compute_policy_loss_gspo(
        torch.tensor(old), log_prob, torch.tensor(adv), batch.torch_mask, loss_agg_mode="token-mean", config=config
    )
    loss.backward()
    losses = np.zeros_like(adv)
    grads = np.zeros_like(adv)
    num_seqs = sum(1 for i in range(adv.shape[0]) if batch.mask[i].sum() > 0)
    for i in range(adv.shape[0]):
        length = batch.mask[i].sum()
        if length == 0:
            continue
        seq_ratio = np.exp(sum((new[i, t] - old[i, t]) for t in range(adv.shape[1]) if batch.mask[i, t]) / length)
        for t in range(adv.shape[1]):
            if not batch.mask[i, t]:
                continue
            clipped = min(max(seq_ratio, 0.9), 1.15)
            unclipped_active = -adv[i, t] * seq_ratio >= -adv[i, t] * clipped
            losses[i, t] = max(-adv[i, t] * seq_ratio, -adv[i, t] * clipped)
            # GSPO-token: d ratio / d log_prob_t = ratio (the sequence ratio is detached).
            grads[i, t] = (-adv[i, t] * seq_ratio if unclipped_active else 0.0) / length / num_seqs
    # Always aggregated seq-mean-token-mean, whatever loss_agg_mode says.
    assert loss.item() == pytest.approx(aggregate(losses, batch.mask, "seq-mean-token-mean"), rel=1e-10)
    np.testing.assert_allclose(log_prob.grad.numpy(), grads, atol=1e-10)
    assert 0.0 <= metrics["pg_clipfrac"] <= 1.0


def test_geo_mean_matches_reference():
    batch, old, new, adv = random_policy_inputs(seed=31)
    config = actor_config(clip_ratio_low=0.4, clip_ratio_high=0.4)
    loss, metrics = compute_policy_loss_geo_mean(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), batch.torch_mask, config=config
    )
    per_seq = []
    for i in range(adv.shape[0]):
        positions = [t for t in range(adv.shape[1]) if batch.mask[i, t]]
        if not positions:
            continue
        clipped_logs = []
        for t in positions:
            x = new[i, t] - old[i, t]
            clamped = min(max(x, -0.4), 0.4)
            # pessimistic: for A > 0 take the smaller log-ratio, for A < 0 the larger
            clipped_logs.append(min(x, clamped) if adv[i, t] > 0 else max(x, clamped) if adv[i, t] < 0 else 0.0)
        ratio = np.exp(np.mean(clipped_logs))
        per_seq.append(-np.mean([adv[i, t] for t in positions]) * ratio)
    assert loss.item() == pytest.approx(np.mean(per_seq), rel=1e-10)
    assert 0.0 < metrics["pg_clipfrac"] + metrics["pg_clipfrac_lower"] <= 1.0
