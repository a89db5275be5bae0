import torch

from tests.trainer.ppo.algos.reference import ragged_batch
from verl.trainer.ppo.core_algos import compute_remax_outcome_advantage


def test_remax_is_reward_to_go_minus_greedy_baseline():
    batch = ragged_batch(seed=7)
    baselines = batch.rng.normal(size=batch.rewards.shape[0])
    advantages, returns = compute_remax_outcome_advantage(
        batch.torch_rewards, torch.tensor(baselines), batch.torch_mask
    )
    for i in range(batch.rewards.shape[0]):
        for t in range(batch.rewards.shape[1]):
            if batch.mask[i, t] > 0:
                to_go = batch.rewards[i, t:].sum()
                assert abs(returns[i, t].item() - to_go) < 1e-10
                assert abs(advantages[i, t].item() - (to_go - baselines[i])) < 1e-10
            else:
                assert advantages[i, t].item() == 0.0
