import numpy as np
import torch

from tests.trainer.ppo.algos.reference import ragged_batch, whiten
from verl.trainer.ppo.core_algos import compute_gae_advantage_return


def reference_gae(rewards, values, mask, gamma, lam):
    """Recursion over each row's valid positions only (padding and holes are skipped)."""
    advantages = np.zeros_like(rewards)
    returns = np.zeros_like(rewards)
    for i in range(rewards.shape[0]):
        positions = [t for t in range(rewards.shape[1]) if mask[i, t] > 0]
        next_value, running = 0.0, 0.0
        for t in reversed(positions):
            delta = rewards[i, t] + gamma * next_value - values[i, t]
            running = delta + gamma * lam * running
            advantages[i, t] = running
            returns[i, t] = running + values[i, t]
            next_value = values[i, t]
    return whiten(advantages, mask) * mask, returns


def test_gae_matches_reference_on_ragged_batch():
    batch = ragged_batch(seed=0)
    advantages, returns = compute_gae_advantage_return(
        batch.torch_rewards, batch.torch_values, batch.torch_mask, gamma=0.9, lam=0.8
    )
    expected_adv, expected_ret = reference_gae(batch.rewards, batch.values, batch.mask, 0.9, 0.8)
    np.testing.assert_allclose(advantages.numpy(), expected_adv, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(returns.numpy() * batch.mask, expected_ret, rtol=1e-10, atol=1e-10)


def test_gae_skips_holes_in_the_mask():
    """Multi-turn masks have holes (tool output); the recursion must carry across them."""
    batch = ragged_batch(seed=1)
    mask = batch.mask.copy()
    mask[1:, 1] = 0.0
    rewards = batch.rewards * mask
    advantages, returns = compute_gae_advantage_return(
        torch.tensor(rewards), batch.torch_values, torch.tensor(mask), gamma=0.95, lam=0.9
    )
    expected_adv, expected_ret = reference_gae(rewards, batch.values, mask, 0.95, 0.9)
    np.testing.assert_allclose(advantages.numpy(), expected_adv, atol=1e-10)
    np.testing.assert_allclose(returns.numpy() * mask, expected_ret, atol=1e-10)


def test_gae_with_gamma_lam_one_is_returns_minus_values():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.5, -1.0, 0.0, 0.0]], dtype=torch.float64)
    values = torch.tensor([[0.2, 0.4, 0.6, 9.0], [0.1, -0.3, 9.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.float64)
    advantages, returns = compute_gae_advantage_return(rewards, values, mask, gamma=1.0, lam=1.0)
    # Hand-worked: reward-to-go on valid tokens.
    expected_returns = np.array([[1.0, 1.0, 1.0], [-0.5, -1.0, np.nan]])
    np.testing.assert_allclose(returns[0, :3].numpy(), expected_returns[0, :3])
    np.testing.assert_allclose(returns[1, :2].numpy(), expected_returns[1, :2])
    raw = (np.array([[1.0, 1.0, 1.0, 0], [-0.5, -1.0, 0, 0]]) - values.numpy()) * mask.numpy()
    np.testing.assert_allclose(advantages.numpy(), whiten(raw, mask.numpy()) * mask.numpy(), atol=1e-12)


def test_gae_is_finite_for_empty_and_single_token_masks():
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    values = torch.tensor([[0.5, 0.0], [0.3, 0.1]])
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    advantages, returns = compute_gae_advantage_return(rewards, values, mask, gamma=1.0, lam=1.0)
    assert torch.isfinite(advantages).all() and torch.isfinite(returns).all()
    assert advantages[1].abs().sum() == 0
