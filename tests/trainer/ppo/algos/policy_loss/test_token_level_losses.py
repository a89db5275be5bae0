"""SAPO, GPG and CISPO: per-token losses that honour every aggregation mode."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trainer.ppo.algos.policy_loss.test_vanilla import random_policy_inputs
from tests.trainer.ppo.algos.reference import AGG_MODES, actor_config, aggregate
from verl.trainer.ppo.core_algos import get_policy_loss_fn


def sapo_reference(old, new, adv, tau_pos, tau_neg):
    out = np.zeros_like(adv)
    for index in np.ndindex(adv.shape):
        ratio = np.exp(new[index] - old[index])
        tau = tau_pos if adv[index] > 0 else tau_neg
        out[index] = -(4.0 / tau) / (1 + np.exp(-tau * (ratio - 1))) * adv[index]
    return out


def gpg_reference(old, new, adv):
    return -new * adv


def cispo_reference(old, new, adv, low, high):
    return -np.clip(np.exp(new - old), 1 - low, 1 + high) * adv * new


REFERENCES = {
    "sapo": lambda old, new, adv: sapo_reference(old, new, adv, 1.0, 1.05),
    "gpg": gpg_reference,
    "cispo": lambda old, new, adv: cispo_reference(old, new, adv, 0.2, 0.28),
}


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_token_level_loss_matches_reference(name, mode):
    batch, old, new, adv = random_policy_inputs(seed=40)
    loss, metrics = get_policy_loss_fn(name)(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), batch.torch_mask, mode, actor_config()
    )
    assert loss.item() == pytest.approx(aggregate(REFERENCES[name](old, new, adv), batch.mask, mode), rel=1e-10)
    assert all(np.isfinite(v) for v in metrics.values())


def test_sapo_gradient_equals_policy_gradient_at_ratio_one():
    """f'(1) = 1, so on-policy SAPO has the plain policy gradient -A."""
    log_prob = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    loss, _ = get_policy_loss_fn("sapo")(
        torch.zeros(1, 3, dtype=torch.float64), log_prob, adv, torch.ones(1, 3), "token-mean", actor_config()
    )
    loss.backward()
    np.testing.assert_allclose(log_prob.grad.numpy(), -adv.numpy() / 3, atol=1e-12)


def test_cispo_keeps_gradient_of_clipped_tokens():
    """Unlike PPO, a token whose ratio is far outside the clip range still gets -clip(r) * A."""
    log_prob = torch.tensor([[np.log(5.0)]], dtype=torch.float64, requires_grad=True)
    loss, metrics = get_policy_loss_fn("cispo")(
        torch.zeros(1, 1, dtype=torch.float64),
        log_prob,
        torch.tensor([[2.0]], dtype=torch.float64),
        torch.ones(1, 1),
        "token-mean",
        actor_config(clip_ratio_high=0.28),
    )
    loss.backward()
    assert log_prob.grad.item() == pytest.approx(-1.28 * 2.0)
    assert metrics["pg_clipfrac"] == 1.0


BUILTIN_LOSSES = ["vanilla", "gspo", "sapo", "gpg", "clip_cov", "kl_cov", "geo_mean", "cispo"]


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(BUILTIN_LOSSES),
    mode=st.sampled_from(["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"]),
    extra=st.integers(1, 4),
    seed=st.integers(0, 10_000),
)
def test_every_loss_is_unchanged_by_padding(name, mode, extra, seed):
    batch, old, new, adv = random_policy_inputs(seed=seed)
    config = actor_config(clip_cov_lb=-10.0, clip_cov_ub=10.0)
    garbage = np.random.default_rng(seed).normal(size=(adv.shape[0], extra))

    def padded(x):
        return torch.tensor(np.concatenate([x, garbage], axis=1))

    padded_mask = torch.tensor(np.concatenate([batch.mask, np.zeros_like(garbage)], axis=1))
    torch.manual_seed(0)
    plain, _ = get_policy_loss_fn(name)(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), batch.torch_mask, mode, config
    )
    torch.manual_seed(0)
    with_padding, _ = get_policy_loss_fn(name)(padded(old), padded(new), padded(adv), padded_mask, mode, config)
    assert with_padding.item() == pytest.approx(plain.item(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", BUILTIN_LOSSES)
def test_every_loss_is_finite_on_an_empty_mask(name):
    batch, old, new, adv = random_policy_inputs(seed=41)
    loss, metrics = get_policy_loss_fn(name)(
        torch.tensor(old), torch.tensor(new), torch.tensor(adv), torch.zeros(adv.shape), "token-mean", actor_config()
    )
    assert loss.item() == 0.0
    assert all(np.isfinite(v) for v in metrics.values())
