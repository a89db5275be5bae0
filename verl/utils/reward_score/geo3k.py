"""Geometry3K-style scorer (verl's ``geo3k``): reasoning in ``<think>...</think>``, the answer in ``\\boxed{}``.

``score = (1 - format_score) * accuracy + format_score * format``: accuracy is 1 when the last boxed answer
equals the ground truth (:func:`verl.utils.reward_score.math.is_equiv`), format is 1 when the response is
``<think>...</think>`` followed by text holding a ``\\boxed{...}``. ``format_score`` defaults to 0.1, as in verl.
"""

from __future__ import annotations

import re

from verl.utils.reward_score.math import is_equiv, last_boxed_only_string, remove_boxed

_FORMAT = re.compile(r"\s*<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)


def format_reward(solution_str: str) -> float:
    """1.0 for ``<think>...</think> ... \\boxed{...} ...``, else 0.0."""
    return 1.0 if _FORMAT.fullmatch(solution_str) else 0.0


def accuracy_reward(solution_str: str, ground_truth: str, use_boxed: bool = True) -> float:
    """1.0 when the last boxed answer (the whole response when ``use_boxed`` is False) equals ``ground_truth``."""
    if use_boxed:
        boxed = last_boxed_only_string(solution_str)
        if boxed is None:
            return 0.0
        answer = remove_boxed(boxed)
    else:
        answer = solution_str
    return 1.0 if is_equiv(answer.strip(), str(ground_truth).strip()) else 0.0


def compute_score(solution_str: str, ground_truth: str, use_boxed: bool = True, format_score: float = 0.1) -> float:
    """``(1 - format_score) * accuracy + format_score * format``, a float as verl's ``geo3k.compute_score`` returns."""
    accuracy = accuracy_reward(solution_str, ground_truth, use_boxed)
    return (1.0 - format_score) * accuracy + format_score * format_reward(solution_str)
