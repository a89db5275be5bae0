import numpy as np
import pytest
import torch

from tests.trainer.ppo.algos.policy_loss.test_vanilla import random_policy_inputs
from tests.trainer.ppo.algos.reference import actor_config, aggregate
from verl.trainer.ppo.core_algos import compute_policy_loss_clip_cov, compute_policy_loss_kl_cov


def centered_covariance(adv, new, mask):
    valid = mask > 0
    return (adv - adv[valid].mean()) * (new - new[valid].mean())


def test_clip_cov_detaches_every_in_band_token_when_ratio_is_one():
    batch, old, new, adv = random_policy_inputs(seed=50)
    config = actor_config(clip_ratio_low=0.2, clip_ratio_high=0.2, clip_cov_ratio=1.0, clip_cov_lb=0.0, clip_cov_ub=2.0)
    log_prob = torch.tensor(new, requires_grad=True)
    loss, metrics = compute_policy_loss_clip_cov(
        torch.tensor(old), log_prob, torch.tensor(adv), batch.torch_mask, config=config
    )
    loss.backward()
    cov = centered_covariance(adv, new, batch.mask)
    ratio = np.exp(new - old)
    unclipped, clipped = -adv * ratio, -adv * np.clip(ratio, 0.8, 1.2)
    chosen = (batch.mask > 0) & ~(clipped > unclipped) & (cov > 0.0) & (cov < 2.0)
    assert chosen.sum() > 0
    expected = aggregate(np.maximum(unclipped, clipped) * ~chosen, batch.mask, "token-mean")
    assert loss.item() == pytest.approx(expected, rel=1e-10)
    assert metrics["pg_clipfrac"] == pytest.approx(chosen.sum() / batch.mask.sum())
    assert np.all(log_prob.grad.numpy()[chosen] == 0)


def test_clip_cov_detaches_the_configured_fraction():
    batch, old, new, adv = random_policy_inputs(seed=51)
    config = actor_config(clip_cov_ratio=0.1, clip_cov_lb=-100.0, clip_cov_ub=100.0, clip_ratio_high=10.0)
    _, metrics = compute_policy_loss_clip_cov(
        torch.tensor(old), torch.tensor(old), torch.tensor(adv), batch.torch_mask, config=config
    )
    num_valid = int(batch.mask.sum())
    assert metrics["pg_clipfrac"] == pytest.approx(max(int(0.1 * num_valid), 1) / num_valid)


def test_kl_cov_penalises_top_covariance_tokens():
    batch, old, new, adv = random_policy_inputs(seed=52)
    config = actor_config(kl_cov_ratio=0.2, ppo_kl_coef=0.5)
    loss, metrics = compute_policy_loss_kl_cov(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), batch.torch_mask, config=config
    )
    valid = batch.mask > 0
    cov = centered_covariance(adv, new, batch.mask)
    num_penalised = max(1, int(valid.sum() * 0.2))
    threshold = np.sort(cov[valid])[::-1][num_penalised - 1]
    penalised = valid & (cov >= threshold)
    losses = -adv * np.exp(new - old) + penalised * 0.5 * np.abs(new - old)
    assert loss.item() == pytest.approx(aggregate(losses, batch.mask, "token-mean"), rel=1e-10)
    assert metrics["ppo_kl"] == pytest.approx(np.abs(new - old)[valid].mean(), rel=1e-10)


def test_covariance_losses_are_finite_on_empty_masks():
    zeros = torch.zeros(2, 3, dtype=torch.float64)
    for fn in (compute_policy_loss_clip_cov, compute_policy_loss_kl_cov):
        loss, metrics = fn(zeros, zeros, zeros, zeros, config=actor_config())
        assert torch.isfinite(loss) and all(np.isfinite(v) for v in metrics.values())
