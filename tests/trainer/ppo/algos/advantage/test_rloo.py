import numpy as np
import torch

from tests.trainer.ppo.algos.reference import groups_of, ragged_batch
from verl.trainer.ppo.core_algos import compute_rloo_outcome_advantage


def test_rloo_matches_leave_one_out_formula():
    batch = ragged_batch(seed=4)
    advantages, returns = compute_rloo_outcome_advantage(batch.torch_rewards, batch.torch_mask, batch.index)
    scores = batch.rewards.sum(axis=1)
    expected = np.zeros(len(scores))
    for rows in groups_of(batch.index).values():
        for row in rows:
            others = [scores[j] for j in rows if j != row]
            expected[row] = scores[row] - (sum(others) / len(others) if others else 0.0)
    np.testing.assert_allclose(advantages.numpy(), expected[:, None] * batch.mask, atol=1e-10)
    assert torch.equal(advantages, returns)


def test_rloo_hand_worked():
    # scores 3, 1, 2 in one group: 3 - 1.5, 1 - 2.5, 2 - 2.
    rewards = torch.tensor([[3.0], [1.0], [2.0]], dtype=torch.float64)
    advantages, _ = compute_rloo_outcome_advantage(rewards, torch.ones_like(rewards), np.array([7, 7, 7]))
    np.testing.assert_allclose(advantages[:, 0].numpy(), [1.5, -1.5, 0.0])


def test_rloo_singleton_and_equal_rewards_are_finite():
    rewards = torch.tensor([[2.0], [1.0], [1.0]])
    advantages, _ = compute_rloo_outcome_advantage(rewards, torch.ones_like(rewards), np.array(["a", "b", "b"]))
    assert torch.isfinite(advantages).all()
    np.testing.assert_allclose(advantages[:, 0].numpy(), [2.0, 0.0, 0.0])
