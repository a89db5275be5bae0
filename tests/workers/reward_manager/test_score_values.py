"""Which return values count as a reward, and what the refusal says."""

import numpy as np
import pytest
import torch

from verl.workers.reward_manager.score_values import InvalidScore, parse_score


@pytest.mark.parametrize(
    ("value", "score"),
    [(1, 1.0), (0.25, 0.25), (True, 1.0), (np.float32(0.5), 0.5), (np.int64(3), 3.0), (torch.tensor(2.0), 2.0)],
)
def test_numbers_are_rewards(value, score):
    assert parse_score(value) == (score, {})


def test_a_dict_gives_its_keys_as_extras():
    assert parse_score({"score": np.float64(0.5), "acc": True}) == (0.5, {"score": np.float64(0.5), "acc": True})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.0", "returned the string '1.0'; a reward must be a finite number"),
        ("correct", "returned the string 'correct'"),
        (float("nan"), "returned nan;"),
        (float("-inf"), "returned -inf;"),
        (None, "returned NoneType None;"),
        ([1.0], "returned list [1.0];"),
        (1 + 2j, "returned complex (1+2j);"),
        (torch.tensor([1.0, 2.0]), "returned a Tensor of 2 elements"),
        ({"acc": 1.0}, "returned a dict without a 'score' key (keys ['acc'])"),
        ({"score": "0.5"}, "returned a dict whose 'score' is the string '0.5'"),
        ({"score": float("nan")}, "returned a dict whose 'score' is nan"),
    ],
)
def test_non_rewards_are_refused_saying_what_came_back(value, message):
    with pytest.raises(InvalidScore) as info:
        parse_score(value)
    assert message in str(info.value)
