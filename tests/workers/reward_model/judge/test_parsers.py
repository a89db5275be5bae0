"""Judgment parsers on hand-written judgments: the rating they find, None when there is none."""

from __future__ import annotations

import pytest

from verl.workers.reward_model.judge.parsers import get_judgment_parser, register_judgment_parser

CASES = {
    "last_number": [
        ("The response is correct.\n8", 8.0),
        ("Rating: 7.5", 7.5),
        ("I give it -2 then 3", 3.0),
        (".5", 0.5),
        ("no digits here", None),
        ("", None),
    ],
    "score_tag": [
        ("reasoning... <score>6</score>", 6.0),
        ("<SCORE> 2.5 </SCORE> and later <score>9</score>", 9.0),
        ("score: 6", None),
        ("<score>six</score>", None),
    ],
    "boxed": [("so the rating is \\boxed{4}", 4.0), ("\\boxed{ 10 }", 10.0), ("boxed 4", None)],
    "yes_no": [
        ("Yes, it is right.", 1.0),
        ("The answer: no. Although yes would be nice", 0.0),
        ("yesterday it was nothing", None),
        ("", None),
    ],
}


@pytest.mark.parametrize("name,text,expected", [(n, t, e) for n, cases in CASES.items() for t, e in cases])
def test_parsers(name, text, expected):
    assert get_judgment_parser(name)(text) == expected


def test_unknown_parser_lists_the_registered_ones():
    with pytest.raises(ValueError, match="reward_model.judge.parser.*boxed.*last_number.*score_tag.*yes_no"):
        get_judgment_parser("nope")


def test_a_second_parser_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_judgment_parser("yes_no")(lambda text: None)
