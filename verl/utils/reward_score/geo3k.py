"""Geometry3K (``hiyouga/geometry3k``): format and accuracy of a ``<think>...</think>`` then ``\\boxed{}`` answer.

``score = (1 - format_score) * accuracy + format_score * format``: ``format`` is 1 when the response has a
``<think>...</think>`` section followed by a ``\\boxed{...}`` answer, ``accuracy`` when the boxed answer is
equivalent to the ground truth (math normalisation: fractions, units, spacing).
"""

from __future__ import annotations

import re

from verl.utils.reward_score.math import is_equiv, last_boxed_only_string, remove_boxed

_FORMAT = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)


def format_reward(predict_str: str) -> float:
    """1.0 for ``<think>...</think> ... \\boxed{...}``, else 0.0."""
    return 1.0 if _FORMAT.fullmatch(predict_str.strip()) else 0.0


def acc_reward(predict_str: str, ground_truth: str, use_boxed: bool = True) -> float:
    """1.0 when the last boxed answer (the whole response without ``use_boxed``) equals the ground truth."""
    if use_boxed:
        boxed = last_boxed_only_string(predict_str)
        if boxed is None:
            return 0.0
        answer = remove_boxed(boxed)
    else:
        answer = predict_str
    return 1.0 if is_equiv(answer, str(ground_truth)) else 0.0


def compute_score(predict_str: str, ground_truth: str, use_boxed: bool = True, format_score: float = 0.1) -> float:
    """``(1 - format_score) * accuracy + format_score * format``."""
    return (1.0 - format_score) * acc_reward(predict_str, ground_truth, use_boxed) + format_score * format_reward(
        predict_str
    )
