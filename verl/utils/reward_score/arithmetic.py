"""Scorer of the built-in arithmetic task (:mod:`verl.utils.dataset.arithmetic`).

The prompt asks for the answer after ``####``. A response earns 1.0 when its answer is right; the answer
is the number after the last ``####`` or, when the model ignored the format, the last number of the
response (small models rarely follow the format at first, and the task is there to learn arithmetic).
The extra keys report whether the format was followed, so its rate can be watched as training goes on.
"""

from __future__ import annotations

from verl.utils.reward_score import gsm8k
from verl.utils.reward_score._numbers import numbers_equal


def compute_score(solution_str: str, ground_truth: str) -> dict[str, float]:
    """``{"score": 1.0 if correct else 0.0, "acc": same, "format": 1.0 if '#### n' was used}``."""
    strict = gsm8k.extract_solution(solution_str, method="strict")
    answer = strict if strict is not None else gsm8k.extract_solution(solution_str, method="flexible")
    correct = answer is not None and numbers_equal(answer, str(ground_truth))
    return {"score": float(correct), "acc": float(correct), "format": float(strict is not None)}
