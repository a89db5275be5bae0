"""PRIME's math scorer (``numina_*`` data sources): the final answer of a response against the ground truth.

The answer is the last ``\\boxed{}`` (format correct), else the text after the last "answer is" / the last number
(format incorrect). Equivalence is the math normalisation of :mod:`verl.utils.reward_score.math` (fractions, units,
LaTeX spacing, then symbolic comparison when math-verify is installed).
"""

from __future__ import annotations

import re

from verl.utils.reward_score._numbers import last_number
from verl.utils.reward_score.math import is_equiv, last_boxed_only_string, remove_boxed

_ANSWER_IS = re.compile(r"(?i)answer is[:\s]*\$?([^\n$]+)")


def extract_answer(model_output: str) -> tuple[str | None, bool]:
    """``(answer, format_correct)``: the last boxed answer (True), else "the answer is X" or the last number
    (False); ``(None, False)`` when there is none."""
    boxed = last_boxed_only_string(model_output)
    if boxed is not None:
        try:
            return remove_boxed(boxed), True
        except ValueError:
            pass
    matches = _ANSWER_IS.findall(model_output)
    if matches:
        return matches[-1].strip().rstrip("."), False
    return last_number(model_output), False


def compute_score(model_output: str, ground_truth: str) -> tuple[bool, bool, str | None]:
    """``(is_correct, format_correct, extracted_answer)``; the ground truth may itself be boxed."""
    answer, format_correct = extract_answer(model_output)
    gold = str(ground_truth)
    gold_boxed = last_boxed_only_string(gold)
    if gold_boxed is not None:
        gold = remove_boxed(gold_boxed)
    correct = answer is not None and is_equiv(answer, gold)
    return correct, format_correct, answer
