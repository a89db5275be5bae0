"""Search-R1 style question answering: exact match of the last ``<answer>...</answer>`` against the gold answers.

Answers are compared after SQuAD normalisation (lower case, punctuation and the articles a/an/the removed, spaces
collapsed). ``ground_truth`` is ``{"target": answer or [answers]}``. A correct answer scores ``score`` (1.0),
divided by 4 when the response opens or closes more than 10 answer tags; a wrong one ``format_score`` (0.0); no
answer tag 0.
"""

from __future__ import annotations

import re
import string
from typing import Any

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
MAX_ANSWER_TAGS = 10


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and articles, collapse white space."""
    text = "".join(ch for ch in str(text).lower() if ch not in set(string.punctuation))
    return " ".join(_ARTICLES.sub(" ", text).split())


def _targets(golden_answers: Any) -> list[str]:
    return [golden_answers] if isinstance(golden_answers, str) else [str(a) for a in golden_answers]


def em_check(prediction: str, golden_answers: Any) -> int:
    """1 when the normalised prediction equals a normalised gold answer, else 0."""
    predicted = normalize_answer(prediction)
    return int(any(normalize_answer(answer) == predicted for answer in _targets(golden_answers)))


def subem_check(prediction: str, golden_answers: Any) -> int:
    """1 when a normalised gold answer occurs inside the normalised prediction, else 0."""
    predicted = normalize_answer(prediction)
    return int(any(normalize_answer(answer) in predicted for answer in _targets(golden_answers)))


def extract_solution(solution_str: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>``, or None."""
    matches = _ANSWER.findall(solution_str)
    return matches[-1].strip() if matches else None


def count_answer_tags(text: str) -> tuple[int, int]:
    """``(number of <answer>, number of </answer>)``."""
    return text.count("<answer>"), text.count("</answer>")


def compute_score(solution_str: str, ground_truth: dict, method: str = "strict", format_score=0.0, score=1.0):
    """Exact-match score (see the module docstring)."""
    answer = extract_solution(solution_str)
    if answer is None:
        return 0
    if not em_check(answer, ground_truth["target"]):
        return format_score
    opened, closed = count_answer_tags(solution_str)
    return score / 4 if max(opened, closed) > MAX_ANSWER_TAGS else score


def compute_score_subem(solution_str: str, ground_truth: dict, method: str = "strict", format_score=0.0, score=1.0):
    """Substring-match score: ``score`` when a gold answer occurs in the extracted answer."""
    answer = extract_solution(solution_str)
    if answer is None:
        return 0
    return score if subem_check(answer, ground_truth["target"]) else format_score
