import numpy as np
import torch

from tests.trainer.ppo.algos.reference import groups_of, ragged_batch
from verl.trainer.ppo.core_algos import compute_gpg_outcome_advantage


def test_gpg_scales_centered_scores_by_batch_over_nonzero():
    batch = ragged_batch(seed=9)
    rewards = batch.rewards.copy()
    rewards[[1, 2]] = 0.0  # some responses with zero score
    advantages, _ = compute_gpg_outcome_advantage(torch.tensor(rewards), batch.torch_mask, batch.index, f_norm=2.0)
    scores = rewards.sum(axis=1)
    alpha = len(scores) / max(int(np.count_nonzero(scores)), 1)
    expected = np.zeros(len(scores))
    for rows in groups_of(batch.index).values():
        mean = 0.0 if len(rows) == 1 else scores[rows].mean()
        for row in rows:
            expected[row] = alpha * (scores[row] - mean) / 2.0
    np.testing.assert_allclose(advantages.numpy(), expected[:, None] * batch.mask, atol=1e-10)


def test_gpg_all_zero_rewards_is_finite():
    rewards = torch.zeros(3, 2)
    advantages, _ = compute_gpg_outcome_advantage(rewards, torch.ones(3, 2), np.array(["a", "a", "b"]))
    assert torch.isfinite(advantages).all() and advantages.abs().sum() == 0
