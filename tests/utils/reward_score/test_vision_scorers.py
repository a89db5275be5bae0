"""geo3k and multiple-choice scorers on hand-written responses."""

import pytest

from verl.utils.reward_score import default_compute_score


@pytest.mark.parametrize(
    "response, expected",
    [
        ("<think>angles sum</think> so x = \\boxed{3}", 1.0),
        ("x = \\boxed{3}", 0.9),
        ("<think>hm</think> \\boxed{4}", 0.1),
        ("<think>hm</think> three", 0.0),
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


def test_geo3k_unboxed_answer_is_the_whole_response():
    from verl.utils.reward_score import geo3k

    assert geo3k.compute_score(" 3 ", "3", use_boxed=False, format_score=0.0) == 1.0
    assert geo3k.compute_score("\\boxed{3}", "3", use_boxed=True, format_score=0.0) == 1.0
    assert geo3k.compute_score(" 4 ", "3", use_boxed=False, format_score=0.0) == 0.0
