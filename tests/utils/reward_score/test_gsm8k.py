"""GSM8K answer extraction and scoring on hand-made answers, adversarial ones included."""

import pytest

from verl.utils.reward_score import gsm8k


@pytest.mark.parametrize(
    "response, truth, strict, flexible",
    [
        ("She sold 48 + 24 = 72 clips.\n#### 72", "72", 1.0, 1.0),
        ("#### 1,000", "1000", 1.0, 1.0),  # thousands separator in the response
        ("The total is 1000.\n#### 1000", "1,000", 1.0, 1.0),  # ... or in the ground truth
        ("#### $18", "18", 1.0, 1.0),
        ("#### -3", "-3", 1.0, 1.0),
        ("#### 72.0", "72", 1.0, 1.0),
        ("#### ７２", "72", 1.0, 1.0),  # fullwidth digits
        ("#### ٧٢", "72", 1.0, 1.0),  # Arabic-Indic digits
        ("The answer is 72.", "72", 0.0, 1.0),  # no '####': only the flexible reading finds it
        ("#### 71\nno wait, #### 72", "72", 1.0, 1.0),  # the last answer counts
        ("#### 72\nActually 80 apples", "72", 1.0, 0.0),  # flexible takes the very last number
        ("I don't know.", "72", 0.0, 0.0),
        ("", "72", 0.0, 0.0),
    ],
)
def test_strict_and_flexible_scores(response, truth, strict, flexible):
    assert gsm8k.compute_score(response, truth, method="strict") == strict
    assert gsm8k.compute_score(response, truth, method="flexible") == flexible


def test_wrong_answer_in_format_gets_format_score():
    assert gsm8k.compute_score("#### 71", "72", format_score=0.1) == 0.1
    assert gsm8k.compute_score("no number", "72", format_score=0.1) == 0.0


def test_only_the_tail_is_read_for_very_long_responses():
    """A 100k-character response: the answer at the end is found, one buried at the start is not (by design)."""
    filler = "blah " * 20_000
    assert len(filler) == 100_000
    assert gsm8k.compute_score(filler + "#### 72", "72") == 1.0
    assert gsm8k.compute_score("#### 72\n" + filler, "72") == 0.0
    assert gsm8k.compute_score("7" * 100_000, "7" * 300, method="flexible") == 1.0


def test_extract_solution_values():
    assert gsm8k.extract_solution("x #### 1,234.5 y") == "1234.5"
    assert gsm8k.extract_solution("a 3 b 4,5", method="flexible") == "45"
    assert gsm8k.extract_solution("nothing") is None
    with pytest.raises(ValueError, match="strict"):
        gsm8k.extract_solution("#### 1", method="loose")
