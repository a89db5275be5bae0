"""geo3k and multiple-choice scorers on hand-written responses."""

import pytest

from verl.utils.reward_score import default_compute_score


@pytest.mark.parametrize(
    "response, expected",
    [
        ("<think>angles sum</think> so x = \\boxed{3}", {"score": 1.0, "acc": 1.0, "format": 1.0}),
        ("x = \\boxed{3}", {"score": 0.9, "acc": 1.0, "format": 0.0}),
        ("<think>hm</think> \\boxed{4}", {"score": 0.1, "acc": 0.0, "format": 1.0}),
        ("<think>hm</think> three", {"score": 0.0, "acc": 0.0, "format": 0.0}),
    ],
)
def test_geo3k(response, expected):
    result = default_compute_score("hiyouga/geometry3k", response, "3")
    assert result == pytest.approx(expected)


@pytest.mark.parametrize(
    "response, truth, score, answered",
    [
        ("The answer is (B).", "B", 1.0, 1.0),
        ("\\boxed{c}", "(C)", 1.0, 1.0),
        ("A", "B. forty", 0.0, 1.0),
        ("Answer: D because ...", "D", 1.0, 1.0),
        ("I am not sure", "A", 0.0, 0.0),
    ],
)
def test_multiple_choice(response, truth, score, answered):
    result = default_compute_score("multiple_choice", response, truth)
    assert (result["score"], result["answered"]) == (score, answered)


def test_multiple_choice_rejects_a_non_letter_ground_truth():
    with pytest.raises(ValueError, match="option letter"):
        default_compute_score("multiple_choice", "A", "42")
