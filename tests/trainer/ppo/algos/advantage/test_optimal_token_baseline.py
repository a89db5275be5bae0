import numpy as np
import pytest
import torch

from tests.trainer.ppo.algos.reference import groups_of, ragged_batch
from verl.trainer.ppo.core_algos import compute_optimal_token_baseline_advantage


def reference_otb(rewards, mask, index, old_log_probs, sum_pi_squared, is_weights, zero_tail, epsilon=1e-8):
    batch_size, length = rewards.shape
    returns = np.zeros_like(rewards)
    cumulative = np.zeros_like(rewards)
    for i in range(batch_size):
        running = 0.0
        for t in reversed(range(length)):
            running += rewards[i, t] * mask[i, t]
            returns[i, t] = running
        total = 0.0
        for t in range(length):
            w = 1 - 2 * np.exp(old_log_probs[i, t]) + sum_pi_squared[i, t]
            if is_weights is not None:
                w *= is_weights[i, t] ** 2
            total += w * mask[i, t]
            cumulative[i, t] = total
    baselines = np.zeros_like(rewards)
    for rows in groups_of(index).values():
        if len(rows) < 2:
            continue
        for t in range(length):
            numerator = sum(returns[j, t] * cumulative[j, t] * mask[j, t] for j in rows)
            denominator = sum(cumulative[j, t] * mask[j, t] for j in rows) + epsilon
            for j in rows:
                baselines[j, t] = numerator / denominator
        if zero_tail:
            lengths = sorted(mask[rows].sum(axis=1))
            longest = [j for j in rows if mask[j].sum() == lengths[-1]]
            if len(longest) == 1 and lengths[-1] > lengths[-2]:
                baselines[longest[0], int(lengths[-2]) :] = 0.0
    return (returns - baselines) * mask, returns


@pytest.mark.parametrize("with_is_weights", [False, True])
@pytest.mark.parametrize("zero_tail", [False, True])
def test_optimal_token_baseline_matches_reference(with_is_weights, zero_tail):
    batch = ragged_batch(seed=10)
    rng = batch.rng
    probs = rng.uniform(0.05, 0.95, size=batch.rewards.shape)
    old_log_probs = np.log(probs)
    sum_pi_squared = probs**2 + rng.uniform(0, 0.2, size=probs.shape)
    is_weights = rng.uniform(0.5, 2.0, size=probs.shape) if with_is_weights else None
    advantages, returns = compute_optimal_token_baseline_advantage(
        batch.torch_rewards,
        batch.torch_mask,
        batch.index,
        torch.tensor(old_log_probs),
        torch.tensor(sum_pi_squared),
        rollout_is_weights=None if is_weights is None else torch.tensor(is_weights),
        handle_zero_tail=zero_tail,
    )
    expected_adv, expected_ret = reference_otb(
        batch.rewards, batch.mask, batch.index, old_log_probs, sum_pi_squared, is_weights, zero_tail
    )
    np.testing.assert_allclose(advantages.numpy(), expected_adv, atol=1e-9)
    np.testing.assert_allclose(returns.numpy(), expected_ret, atol=1e-10)
