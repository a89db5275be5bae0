import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verl.trainer.ppo.core_algos import kl_penalty

rng = np.random.default_rng(70)
LOG_PROB = np.log(rng.uniform(0.01, 1.0, size=(4, 6)))
REF_LOG_PROB = np.log(rng.uniform(0.01, 1.0, size=(4, 6)))


def reference(name, logp, ref):
    delta = logp - ref
    if name in ("kl", "k1"):
        return delta
    if name == "abs":
        return np.abs(delta)
    if name in ("mse", "k2"):
        return 0.5 * delta**2
    if name in ("low_var_kl", "k3"):
        return np.clip(np.exp(-delta) - 1 + delta, 0, 10)
    raise ValueError(name)


NAMES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"]


@pytest.mark.parametrize("name", NAMES)
def test_estimators_match_reference(name):
    out = kl_penalty(torch.tensor(LOG_PROB), torch.tensor(REF_LOG_PROB), name)
    np.testing.assert_allclose(out.numpy(), reference(name, LOG_PROB, REF_LOG_PROB), rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_plus_variants_have_value_of_base_and_gradient_of_k2(name):
    log_prob = torch.tensor(LOG_PROB, requires_grad=True)
    out = kl_penalty(log_prob, torch.tensor(REF_LOG_PROB), name + "+")
    np.testing.assert_allclose(out.detach().numpy(), reference(name, LOG_PROB, REF_LOG_PROB), rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(log_prob.grad.numpy(), LOG_PROB - REF_LOG_PROB, rtol=1e-12)  # d/dx 0.5 x^2


def test_k3_hand_worked():
    # logp = log 0.5, ref = log 0.25: delta = log 2; k3 = 1/2 - 1 + log 2.
    out = kl_penalty(torch.tensor([np.log(0.5)]), torch.tensor([np.log(0.25)]), "k3")
    assert out.item() == pytest.approx(np.log(2) - 0.5, rel=1e-6)


@settings(max_examples=100, deadline=None)
@given(st.floats(-50, 50), st.floats(-50, 50))
def test_k3_is_never_negative(logp, ref):
    assert kl_penalty(torch.tensor([logp]), torch.tensor([ref]), "low_var_kl").item() >= 0.0


def test_unknown_estimator_lists_known_names():
    with pytest.raises(ValueError, match="low_var_kl"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "full")
