"""PRIME's estimator, PRM loss, ranking accuracy and token rewards against hand-worked values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from recipe.prime.prime_core_algos import (
    PRIME_ADV_ESTIMATOR_REGISTRY,
    batch_norm_scale,
    compute_ce_dpo_loss_rm,
    compute_dpo_accuracy,
    compute_prime_rloo_advantage_return,
    implicit_process_rewards,
    last_token_mask,
    masked_rloo,
)


def test_last_token_mask_marks_each_response_end_and_nothing_for_empty_rows():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert last_token_mask(mask).tolist() == [[False, True, False], [True, False, False], [False, False, False]]


def test_masked_rloo_with_one_reward_per_response_is_leave_one_out():
    # acc 1, 0, 1: r_i - mean of the others = 1 - 0.5, 0 - 1, 1 - 0.5
    rewards = torch.tensor([[1.0], [0.0], [1.0]])
    mask = torch.ones(3, 1)
    out = masked_rloo(rewards, mask, np.array(["a", "a", "a"], dtype=object))
    assert out.squeeze(-1).tolist() == pytest.approx([0.5, -1.0, 0.5])


def test_masked_rloo_token_level_uses_each_response_mean_in_the_baseline():
    # group of 2: means 0.3 and 0.6; r * 2 - (0.3 + 0.6) / 1 on the masked tokens
    rewards = torch.tensor([[0.2, 0.4], [0.6, 5.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    out = masked_rloo(rewards, mask, np.array(["g", "g"], dtype=object))
    assert out.tolist() == [pytest.approx([-0.5, -0.1]), pytest.approx([0.3, 0.0])]


def test_masked_rloo_keeps_groups_of_one_unchanged():
    out = masked_rloo(torch.tensor([[2.0, 3.0]]), torch.ones(1, 2), np.array(["solo"], dtype=object))
    assert out.tolist() == [[2.0, 3.0]]


def test_prime_rloo_advantage_matches_hand_worked_example():
    rm_scores = torch.tensor([[0.2, 0.4], [0.6, 5.0]])
    response_mask = torch.tensor([[1, 1], [1, 0]])
    acc = torch.tensor([1.0, 0.0])
    index = np.array(["g", "g"], dtype=object)
    advantages, returns = compute_prime_rloo_advantage_return(
        rm_scores, acc, response_mask, index, reward_dpo_coef=1.0, reward_gt_coef=2.0
    )
    # implicit part [[-0.5, -0.1], [0.3, 0]]; outcome part at the last tokens: 2 * [[0, 1], [-1, 0]]
    combined = [[-0.5, -0.1 + 2.0], [0.3 - 2.0, 0.0]]
    expected_returns = [[combined[0][0] + combined[0][1], combined[0][1]], [combined[1][0], 0.0]]
    assert returns.tolist() == [pytest.approx(row) for row in expected_returns]
    valid = [expected_returns[0][0], expected_returns[0][1], expected_returns[1][0]]
    mean = sum(valid) / 3
    std = math.sqrt(sum((v - mean) ** 2 for v in valid) / 2)
    whitened = [(v - mean) / math.sqrt(std**2 + 1e-8) for v in valid]
    assert advantages[0].tolist() == pytest.approx(whitened[:2], abs=1e-5)
    assert advantages[1, 0].item() == pytest.approx(whitened[2], abs=1e-5)
    assert advantages[1, 1].item() == 0.0


def test_prime_rloo_without_prm_uses_the_outcome_alone():
    acc = torch.tensor([1.0, 0.0, 0.0, 1.0])
    mask = torch.ones(4, 1)
    index = np.array(["a", "a", "b", "b"], dtype=object)
    _, returns = compute_prime_rloo_advantage_return(None, acc, mask, index, reward_dpo_coef=5.0, reward_gt_coef=1.0)
    assert returns.squeeze(-1).tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0])


def test_prime_rloo_is_registered_under_verl_name():
    assert PRIME_ADV_ESTIMATOR_REGISTRY.get("rloo") is compute_prime_rloo_advantage_return
    assert "grpo" not in PRIME_ADV_ESTIMATOR_REGISTRY


def test_ce_dpo_loss_is_binary_cross_entropy_of_the_scaled_log_ratio_sum():
    q = torch.tensor([[0.5, 1.0], [-2.0, 7.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    acc = torch.tensor([1.0, 0.0])
    beta = 0.1
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    expected = -(math.log(sigmoid(0.15)) + math.log(1 - sigmoid(-0.2))) / 2
    assert compute_ce_dpo_loss_rm(q, acc, mask, beta).item() == pytest.approx(expected, rel=1e-6)


def test_dpo_accuracy_weights_pairs_by_outcome_difference():
    scores = torch.tensor([[3.0], [1.0], [2.0], [1.0], [5.0], [1.0], [3.0]])
    mask = torch.ones(7, 1)
    acc = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    index = np.array(["a", "a", "a", "b", "b", "c", "c"], dtype=object)
    # a: pairs (0,1) agree, (1,2) agree, (0,2) weight 0 -> 1.0; b: equal outcomes -> 0.5; c: ranked backwards -> 0.0
    assert compute_dpo_accuracy(scores, acc, mask, index).item() == pytest.approx((1.0 + 0.5 + 0.0) / 3)


def test_implicit_rewards_token_and_whole_granularity():
    q = torch.tensor([[1.0, 2.0, 3.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert implicit_process_rewards(q, mask, 0.5, "token").tolist() == [[0.5, 1.0, 0.0, 0.0]]
    assert implicit_process_rewards(q, mask, 0.5, "whole").tolist() == [[0.0, 0.0, 3.0, 0.0]]
    with pytest.raises(ValueError, match="prime_granularity"):
        implicit_process_rewards(q, mask, 0.5, "step")


def test_batch_norm_scale_is_the_largest_absolute_return_to_go():
    scores = torch.tensor([[1.0, -3.0], [2.0, 0.0]])  # returns-to-go [-2, -3] and [2, 0]
    assert batch_norm_scale(scores).item() == 3.0
