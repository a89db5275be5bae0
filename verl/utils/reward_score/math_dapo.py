"""DAPO-style math scorer: the answer follows the last ``Answer:`` in the response tail.

Returns ``{"score": 1.0 | -1.0, "acc": 1.0 | 0.0, "pred": str}`` as verl's ``math_dapo``: a wrong or
missing answer is penalised (-1), which DAPO uses with group-relative advantages.
"""

from __future__ import annotations

import re

from verl.utils.reward_score._numbers import TAIL_CHARS
from verl.utils.reward_score.math import is_equiv, last_boxed_only_string, remove_boxed

_ANSWER = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


def extract_answer(solution_str: str) -> str | None:
    """Text after the last ``Answer:`` of the tail (a boxed answer there is unwrapped), or None."""
    matches = _ANSWER.findall(solution_str[-TAIL_CHARS:])
    if not matches:
        return None
    answer = matches[-1].strip().rstrip(".").strip()
    boxed = last_boxed_only_string(answer)
    return remove_boxed(boxed) if boxed else answer.strip("$ ")


def compute_score(solution_str: str, ground_truth: str) -> dict[str, float | str]:
    """``score`` +1 for a correct ``Answer:``, -1 otherwise; ``acc`` 1/0; ``pred`` the extracted answer."""
    prediction = extract_answer(solution_str)
    correct = prediction is not None and is_equiv(prediction, str(ground_truth))
    return {"score": 1.0 if correct else -1.0, "acc": float(correct), "pred": prediction or ""}
