"""SFT loss pieces against hand-worked numbers."""

from __future__ import annotations

import math

import pytest
import torch

from verl.trainer.sft.loss import loss_normalizer, next_token_target_mask, sft_nll_sum


def test_target_mask_moves_onto_predicting_positions():
    loss_mask = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 0, 0, 1]])
    assert next_token_target_mask(loss_mask).tolist() == [[0, 1, 1, 0, 0], [1, 0, 0, 1, 0]]


def test_nll_sum_counts_only_targets():
    log_probs = torch.log(torch.tensor([[0.5, 0.25, 0.1, 0.9]], dtype=torch.float64))
    loss_mask = torch.tensor([[0, 0, 1, 1]])  # tokens 2, 3 are targets: predicted at positions 1, 2
    assert float(sft_nll_sum(log_probs, loss_mask)) == pytest.approx(-math.log(0.25) - math.log(0.1))


def test_normalizers_sum_to_the_intended_means():
    # two ranks: rank 0 has NLL sum 6 over 3 tokens, rank 1 has NLL sum 2 over 1 token
    sums, tokens = [6.0, 2.0], [3.0, 1.0]
    balanced = sum(s / loss_normalizer(t, 4.0, 2, True) for s, t in zip(sums, tokens, strict=True))
    per_rank = sum(s / loss_normalizer(t, 4.0, 2, False) for s, t in zip(sums, tokens, strict=True))
    assert balanced == pytest.approx(8.0 / 4.0)  # token mean of the global batch
    assert per_rank == pytest.approx((6.0 / 3.0 + 2.0 / 1.0) / 2)  # mean of the ranks' token means
