"""SPIN's pair loss and pair layout against hand-worked values."""

from __future__ import annotations

import math

import pytest
import torch

from recipe.spin.core_algos import compute_online_dpo_loss, sequence_log_probs
from recipe.spin.spin_trainer import interleave_pairs, lookup
from verl.protocol import DataProto


def test_sequence_log_probs_sum_the_response_tokens():
    log_probs = torch.tensor([[-1.0, -2.0, -5.0], [-0.5, -0.5, -0.5]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert sequence_log_probs(log_probs, mask).tolist() == [-3.0, -1.5]


def test_sigmoid_loss_is_spins_logistic_loss():
    # h = (pi_c - ref_c) - (pi_r - ref_r) = (-1 - -2) - (-3 - -2) = 2; loss = log(1 + exp(-beta h))
    loss = compute_online_dpo_loss(
        torch.tensor([-1.0]), torch.tensor([-3.0]), torch.tensor([-2.0]), torch.tensor([-2.0]), beta=0.5
    )
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1.0)), rel=1e-6)


def test_label_smoothing_mixes_the_flipped_preference():
    args = (torch.tensor([-1.0]), torch.tensor([-3.0]), torch.tensor([-2.0]), torch.tensor([-2.0]))
    loss = compute_online_dpo_loss(*args, beta=0.5, label_smoothing=0.2)
    expected = 0.8 * math.log(1 + math.exp(-1.0)) + 0.2 * math.log(1 + math.exp(1.0))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_ipo_loss_is_squared_distance_to_half_inverse_beta():
    args = (torch.tensor([-1.0]), torch.tensor([-3.0]), torch.tensor([-2.0]), torch.tensor([-2.0]))
    assert compute_online_dpo_loss(*args, beta=0.5, loss_type="ipo").item() == pytest.approx((2.0 - 1.0) ** 2)


def test_equal_policy_and_reference_give_log_two():
    same = torch.tensor([-4.0, -1.0])
    loss = compute_online_dpo_loss(same, same - 1, same, same - 1, beta=0.1)
    assert loss.tolist() == pytest.approx([math.log(2)] * 2)


def test_unknown_loss_type_fails():
    with pytest.raises(ValueError, match="sigmoid"):
        compute_online_dpo_loss(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.zeros(1), 0.1, loss_type="hinge")


def test_interleave_pairs_alternates_chosen_and_rejected():
    chosen = DataProto.from_dict(tensors={"x": torch.tensor([[0], [1], [2]])})
    rejected = DataProto.from_dict(tensors={"x": torch.tensor([[10], [11], [12]])})
    assert interleave_pairs(chosen, rejected).batch["x"].squeeze(-1).tolist() == [0, 10, 1, 11, 2, 12]


def test_lookup_follows_the_dotted_response_key():
    row = {"extra_info": {"answer": "#### 42", "index": 3}, "data_source": "arithmetic"}
    assert lookup(row, "extra_info.answer") == "#### 42"
    assert lookup(row, "data_source") == "arithmetic"
    with pytest.raises(KeyError, match="no 'solution'"):
        lookup(row, "extra_info.solution")
    with pytest.raises(KeyError, match="no field 'answer'"):
        lookup(row, "answer")
