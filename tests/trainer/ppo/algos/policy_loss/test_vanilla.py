import numpy as np
import pytest
import torch

from tests.trainer.ppo.algos.reference import AGG_MODES, actor_config, aggregate, ragged_batch
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, get_policy_loss_fn


def reference_vanilla_losses(old, new, adv, low, high, c):
    losses = np.zeros_like(adv)
    for i in range(adv.shape[0]):
        for t in range(adv.shape[1]):
            ratio = np.exp(new[i, t] - old[i, t])
            loss = max(-adv[i, t] * ratio, -adv[i, t] * min(max(ratio, 1 - low), 1 + high))
            if adv[i, t] < 0:
                loss = min(loss, -adv[i, t] * c)
            losses[i, t] = loss
    return losses


def random_policy_inputs(seed):
    batch = ragged_batch(seed=seed)
    old = np.log(batch.rng.uniform(0.05, 1.0, size=batch.mask.shape))
    new = old + batch.rng.normal(scale=0.5, size=old.shape)
    adv = batch.rng.normal(scale=2.0, size=old.shape)
    return batch, old, new, adv


@pytest.mark.parametrize("mode", AGG_MODES)
def test_vanilla_matches_reference_for_every_agg_mode(mode):
    batch, old, new, adv = random_policy_inputs(seed=20)
    config = actor_config(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)
    loss, metrics = get_policy_loss_fn("vanilla")(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), batch.torch_mask, loss_agg_mode=mode, config=config
    )
    expected = aggregate(reference_vanilla_losses(old, new, adv, 0.2, 0.28, 3.0), batch.mask, mode)
    assert loss.item() == pytest.approx(expected, rel=1e-10)
    valid = batch.mask > 0
    assert metrics["ppo_kl"] == pytest.approx((old - new)[valid].mean(), rel=1e-10)
    assert set(metrics) >= {"pg_clipfrac", "pg_clipfrac_lower", "ppo_kl"}


def test_vanilla_clip_ratio_low_none_falls_back_to_clip_ratio():
    batch, old, new, adv = random_policy_inputs(seed=21)
    config = actor_config(clip_ratio=0.1, clip_ratio_low=None, clip_ratio_high=None)
    loss, _ = compute_policy_loss_vanilla(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), batch.torch_mask, config=config
    )
    expected = aggregate(reference_vanilla_losses(old, new, adv, 0.1, 0.1, 3.0), batch.mask, "token-mean")
    assert loss.item() == pytest.approx(expected, rel=1e-10)


def _single_token_gradient(ratio, advantage, config):
    old = torch.zeros(1, 1, dtype=torch.float64)
    new = torch.tensor([[np.log(ratio)]], dtype=torch.float64, requires_grad=True)
    loss, metrics = compute_policy_loss_vanilla(
        old, new, torch.tensor([[advantage]], dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64), config=config
    )
    loss.backward()
    return loss.item(), new.grad.item(), metrics


def test_clipping_switches_at_exactly_one_plus_minus_eps():
    config = actor_config(clip_ratio_low=0.2, clip_ratio_high=0.3)
    tiny = 1e-7
    # A > 0: gradient flows below 1 + eps_high, vanishes above it.
    _, grad_inside, m_inside = _single_token_gradient(1.3 - tiny, 1.0, config)
    loss_outside, grad_outside, m_outside = _single_token_gradient(1.3 + tiny, 1.0, config)
    assert grad_inside != 0 and m_inside["pg_clipfrac"] == 0.0
    assert grad_outside == 0 and m_outside["pg_clipfrac"] == 1.0 and loss_outside == pytest.approx(-1.3)
    # A < 0: gradient flows above 1 - eps_low, vanishes below it.
    _, grad_inside, _ = _single_token_gradient(0.8 + tiny, -1.0, config)
    loss_outside, grad_outside, m_outside = _single_token_gradient(0.8 - tiny, -1.0, config)
    assert grad_inside != 0
    assert grad_outside == 0 and m_outside["pg_clipfrac"] == 1.0 and loss_outside == pytest.approx(0.8)


def test_dual_clip_bounds_negative_advantage_loss():
    config = actor_config(clip_ratio_c=3.0)
    for ratio in (3.5, 10.0, 1e4):
        loss, grad, metrics = _single_token_gradient(ratio, -2.0, config)
        assert loss == pytest.approx(6.0)  # -A * c
        assert grad == 0 and metrics["pg_clipfrac_lower"] == 1.0
    loss, _, metrics = _single_token_gradient(2.0, -2.0, config)
    assert loss == pytest.approx(4.0) and metrics["pg_clipfrac_lower"] == 0.0
    # Positive advantages are never dual-clipped.
    loss, _, metrics = _single_token_gradient(10.0, 2.0, config)
    assert loss == pytest.approx(-2.0 * 1.28) and metrics["pg_clipfrac_lower"] == 0.0


def test_rollout_is_weights_multiply_token_losses():
    batch, old, new, adv = random_policy_inputs(seed=22)
    weights = batch.rng.uniform(0.5, 1.5, size=adv.shape)
    config = actor_config()
    loss, _ = compute_policy_loss_vanilla(
        torch.tensor(old),
        torch.tensor(new),
        torch.tensor(adv),
        batch.torch_mask,
        config=config,
        rollout_is_weights=torch.tensor(weights),
    )
    expected = aggregate(reference_vanilla_losses(old, new, adv, 0.2, 0.28, 3.0) * weights, batch.mask, "token-mean")
    assert loss.item() == pytest.approx(expected, rel=1e-10)


def test_token_mean_over_micro_batches_equals_whole_batch():
    batch, old, new, adv = random_policy_inputs(seed=23)
    config = actor_config()
    tensors = [torch.tensor(x) for x in (old, new, adv)] + [batch.torch_mask]
    whole, _ = compute_policy_loss_vanilla(*tensors, config=config)
    num_tokens = batch.mask.sum()
    num_seqs = (batch.mask.sum(axis=1) > 0).sum()
    parts = [slice(0, 4), slice(4, 11)]
    summed = sum(
        compute_policy_loss_vanilla(
            *[x[part] for x in tensors], config=config, global_num_tokens=num_tokens, global_num_seqs=num_seqs
        )[0]
        for part in parts
    )
    assert summed.item() == pytest.approx(whole.item(), rel=1e-12)


def test_missing_config_fails_clearly():
    with pytest.raises(ValueError, match="actor config"):
        compute_policy_loss_vanilla(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1))
