import numpy as np
import torch

from tests.trainer.ppo.algos.reference import groups_of, ragged_batch, whiten
from verl.trainer.ppo.core_algos import (
    compute_reinforce_plus_plus_baseline_outcome_advantage,
    compute_reinforce_plus_plus_outcome_advantage,
)


def test_reinforce_plus_plus_discounted_return_whitened():
    batch = ragged_batch(seed=5)
    gamma = 0.9
    advantages, returns = compute_reinforce_plus_plus_outcome_advantage(batch.torch_rewards, batch.torch_mask, gamma)
    expected_returns = np.zeros_like(batch.rewards)
    for i in range(batch.rewards.shape[0]):
        running = 0.0
        for t in reversed(range(int(batch.lengths[i]))):
            running = batch.rewards[i, t] + gamma * running
            expected_returns[i, t] = running
    np.testing.assert_allclose(returns.numpy() * batch.mask, expected_returns, atol=1e-10)
    np.testing.assert_allclose(advantages.numpy(), whiten(expected_returns, batch.mask) * batch.mask, atol=1e-10)


def test_reinforce_plus_plus_baseline_subtracts_group_mean_then_whitens():
    batch = ragged_batch(seed=6)
    advantages, returns = compute_reinforce_plus_plus_baseline_outcome_advantage(
        batch.torch_rewards, batch.torch_mask, batch.index
    )
    scores = batch.rewards.sum(axis=1)
    centered = np.zeros(len(scores))
    for rows in groups_of(batch.index).values():
        mean = 0.0 if len(rows) == 1 else scores[rows].mean()
        for row in rows:
            centered[row] = scores[row] - mean
    expected = whiten(centered[:, None] * batch.mask, batch.mask) * batch.mask
    np.testing.assert_allclose(advantages.numpy(), expected, atol=1e-10)
    assert torch.equal(advantages, returns)


def test_reinforce_plus_plus_finite_on_degenerate_batches():
    one_token = torch.tensor([[1.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0]])
    for advantages, _ in (
        compute_reinforce_plus_plus_outcome_advantage(one_token, mask, 1.0),
        compute_reinforce_plus_plus_outcome_advantage(one_token * 0, mask * 0, 1.0),
        compute_reinforce_plus_plus_baseline_outcome_advantage(one_token, mask, np.array(["a"])),
    ):
        assert torch.isfinite(advantages).all()
