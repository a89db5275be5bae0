import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trainer.ppo.algos.reference import groups_of, ragged_batch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_grpo_passk_outcome_advantage


def reference_grpo(rewards, mask, index, norm_by_std, epsilon=1e-6):
    scores = rewards.sum(axis=1)
    advantages = np.zeros(len(scores))
    for rows in groups_of(index).values():
        group = scores[rows]
        mean, std = (0.0, 1.0) if len(rows) == 1 else (group.mean(), group.std(ddof=1))
        for row in rows:
            advantages[row] = (scores[row] - mean) / (std + epsilon) if norm_by_std else scores[row] - mean
    return advantages[:, None] * mask


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_matches_reference(norm_by_std):
    batch = ragged_batch(seed=2)
    advantages, returns = compute_grpo_outcome_advantage(
        batch.torch_rewards, batch.torch_mask, batch.index, norm_adv_by_std_in_grpo=norm_by_std
    )
    expected = reference_grpo(batch.rewards, batch.mask, batch.index, norm_by_std)
    np.testing.assert_allclose(advantages.numpy(), expected, atol=1e-10)
    assert torch.equal(advantages, returns)


def test_grpo_hand_worked_group():
    # One group with scores 1, 0, 0, 1: mean 0.5, unbiased std sqrt(1/3).
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    mask = torch.ones(4, 2, dtype=torch.float64)
    advantages, _ = compute_grpo_outcome_advantage(rewards, mask, np.array(["a"] * 4, dtype=object), epsilon=0.0)
    expected = 0.5 / np.sqrt(1 / 3)
    np.testing.assert_allclose(advantages[:, 0].numpy(), [expected, -expected, -expected, expected])


@settings(max_examples=40, deadline=None)
@given(
    scores=st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=12),
    num_groups=st.integers(1, 4),
    norm_by_std=st.booleans(),
)
def test_grpo_group_advantages_sum_to_zero(scores, num_groups, norm_by_std):
    count = len(scores)
    index = np.array([str(i % num_groups) for i in range(count)], dtype=object)
    rewards = torch.tensor(scores, dtype=torch.float64).unsqueeze(-1)
    advantages, _ = compute_grpo_outcome_advantage(
        rewards, torch.ones_like(rewards), index, norm_adv_by_std_in_grpo=norm_by_std
    )
    for rows in groups_of(index).values():
        if len(rows) > 1:
            assert abs(advantages[rows, 0].sum().item()) < 1e-6 * max(1.0, max(abs(s) for s in scores))


def test_grpo_is_finite_for_singletons_equal_rewards_and_empty_masks():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    index = np.array(["same", "same", "same", "alone"], dtype=object)
    advantages, _ = compute_grpo_outcome_advantage(rewards, mask, index)
    assert torch.isfinite(advantages).all()
    assert advantages.abs().sum() == 0  # all-equal group -> 0; empty-mask singleton -> 0


def reference_passk(rewards, index, norm_by_std, epsilon=1e-6):
    scores = rewards.sum(axis=1)
    advantages = np.zeros(len(scores))
    for rows in groups_of(index).values():
        if len(rows) < 2:
            continue
        ranked = sorted(rows, key=lambda r: -scores[r])
        gap = scores[ranked[0]] - scores[ranked[1]]
        if norm_by_std:
            gap /= scores[rows].std(ddof=1) + epsilon
        advantages[ranked[0]] = gap
    return advantages


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_passk_only_the_best_response_learns(norm_by_std):
    batch = ragged_batch(seed=3)
    advantages, _ = compute_grpo_passk_outcome_advantage(
        batch.torch_rewards, batch.torch_mask, batch.index, norm_adv_by_std_in_grpo=norm_by_std
    )
    expected = reference_passk(batch.rewards, batch.index, norm_by_std)[:, None] * batch.mask
    np.testing.assert_allclose(advantages.numpy(), expected, atol=1e-10)


def test_grpo_passk_singleton_and_ties_give_zero():
    rewards = torch.tensor([[1.0], [1.0], [0.3]])
    advantages, _ = compute_grpo_passk_outcome_advantage(
        rewards, torch.ones_like(rewards), np.array(["g", "g", "solo"], dtype=object)
    )
    assert torch.isfinite(advantages).all() and advantages.abs().sum() == 0
