import numpy as np
import torch

from tests.trainer.ppo.algos.reference import groups_of, ragged_batch
from verl.trainer.ppo.core_algos import compute_opo_outcome_advantage


def test_opo_uses_length_weighted_group_baseline():
    batch = ragged_batch(seed=8)
    advantages, _ = compute_opo_outcome_advantage(batch.torch_rewards, batch.torch_mask, batch.index)
    scores, lengths = batch.rewards.sum(axis=1), batch.mask.sum(axis=1)
    expected = np.zeros(len(scores))
    for rows in groups_of(batch.index).values():
        total = sum(lengths[j] for j in rows)
        baseline = sum(lengths[j] * scores[j] for j in rows) / total if len(rows) > 1 and total > 0 else 0.0
        for row in rows:
            expected[row] = scores[row] - baseline
    np.testing.assert_allclose(advantages.numpy(), expected[:, None] * batch.mask, atol=1e-10)


def test_opo_hand_worked():
    # lengths 1 and 3, scores 1 and 0: baseline (1*1 + 3*0) / 4 = 0.25.
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    advantages, _ = compute_opo_outcome_advantage(rewards, mask, np.array(["p", "p"]))
    np.testing.assert_allclose(advantages.numpy(), [[0.75, 0, 0], [-0.25, -0.25, -0.25]])
