"""The arithmetic task's scorer and ``default_compute_score`` dispatch."""

import pytest

from verl.utils.reward_score import arithmetic, default_compute_score, get_scorer, register_scorer


@pytest.mark.parametrize(
    "response, truth, score, fmt",
    [
        ("37 + 58 - 12 = 83\n#### 83", "83", 1.0, 1.0),
        ("#### -14", "-14", 1.0, 1.0),
        ("The answer is 83.", "83", 1.0, 0.0),  # right, ignoring the format
        ("#### 82", "83", 0.0, 1.0),
        ("#### 83, or maybe #### 84", "83", 0.0, 1.0),
        ("I cannot compute this", "83", 0.0, 0.0),
        ("#### ８３", "83", 1.0, 1.0),
    ],
)
def test_arithmetic_scores(response, truth, score, fmt):
    result = arithmetic.compute_score(response, truth)
    assert result == {"score": score, "acc": score, "format": fmt}


def test_dispatch_by_data_source():
    assert default_compute_score("openai/gsm8k", "#### 5", "5") == 1.0
    assert default_compute_score("lighteval/MATH", "\\boxed{5}", "5") == 1.0
    assert default_compute_score("DigitalLearningGmbH/MATH-lighteval", "\\boxed{6}", "5") == 0.0
    assert default_compute_score("arithmetic", "#### 5", "5")["score"] == 1.0
    assert default_compute_score("math_dapo", "so\nAnswer: \\frac{1}{2}", "0.5") == {
        "score": 1.0,
        "acc": 1.0,
        "pred": "\\frac{1}{2}",
    }
    assert default_compute_score("aime2024", "Answer: 7", "8")["score"] == -1.0
    assert default_compute_score("math_dapo", "no answer line", "8")["score"] == -1.0


def test_unknown_source_lists_registered_ones():
    with pytest.raises(NotImplementedError, match="openai/gsm8k") as error:
        default_compute_score("my/unknown", "x", "y")
    assert "custom_reward_function" in str(error.value)


def test_register_scorer():
    @register_scorer("test/always_half")
    def half(solution_str, ground_truth):
        return 0.5

    assert get_scorer("test/always_half") is half
    assert default_compute_score("test/always_half", "", "") == 0.5
    with pytest.raises(ValueError, match="already registered"):
        register_scorer("test/always_half")(lambda s, g: 1.0)
