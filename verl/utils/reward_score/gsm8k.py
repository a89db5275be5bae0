"""GSM8K scorer: the answer is the number after ``####`` (strict) or the last number (flexible).

Only the last ``TAIL_CHARS`` (300) characters of a response are searched, as in verl: the final answer
sits at the end, and scanning a 100k-character response with a regex would dominate the reward time.
Unicode digits are mapped to ASCII and ``1,000`` / ``$1000`` / ``1000.`` all read as ``1000``.
"""

from __future__ import annotations

import re

from verl.utils.reward_score._numbers import (
    NUMBER_PATTERN,
    TAIL_CHARS,
    clean_number,
    last_number,
    numbers_equal,
    to_ascii_digits,
)

_STRICT_ANSWER = re.compile(r"####\s*\$?\s*(" + NUMBER_PATTERN + ")")


def extract_solution(solution_str: str, method: str = "strict") -> str | None:
    """The answer in ``solution_str``: the number after the last ``####`` ("strict") or the last number ("flexible")."""
    if method not in ("strict", "flexible"):
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")
    tail = to_ascii_digits(solution_str[-TAIL_CHARS:])
    if method == "strict":
        matches = _STRICT_ANSWER.findall(tail)
        return clean_number(matches[-1]) if matches else None
    return last_number(tail)


def compute_score(
    solution_str: str, ground_truth: str, method: str = "strict", format_score: float = 0.0, score: float = 1.0
) -> float:
    """``score`` for a correct answer, ``format_score`` for a wrong answer in the right format, 0 without an answer."""
    answer = extract_solution(solution_str, method=method)
    if answer is None:
        return 0.0
    return score if numbers_equal(answer, to_ascii_digits(str(ground_truth))) else format_score
