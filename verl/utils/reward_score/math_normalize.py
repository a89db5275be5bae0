"""String normalisation of LaTeX answers, the fallback equivalence when math-verify is not installed.

Two answers are taken as equal when their normal forms match, or when both read as the same rational
number (``0.5``, ``\\frac{1}{2}``, ``1/2``, ``\\dfrac12``). The rules follow the MATH benchmark's
answer checker (Hendrycks et al., 2021): drop ``\\left``/``\\right``, spaces, units in ``\\text{}``,
degree signs, dollar and percent signs; write every fraction as ``\\frac{a}{b}``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from verl.utils.reward_score._numbers import to_ascii_digits

_REMOVED_TOKENS = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "^\\circ", "^{\\circ}", "\\%", "%", "\\$", "$")
_FRAC_SHORTHAND = re.compile(r"\\frac(\d)(\d)")  # \frac12
_FRAC_HALF_SHORTHAND_NUM = re.compile(r"\\frac(\d)(\{)")  # \frac1{2}
_FRAC_HALF_SHORTHAND_DEN = re.compile(r"\\frac(\{[^{}]*\})(\d)")  # \frac{1}2
_SIMPLE_SLASH = re.compile(r"^(-?\d+)/(\d+)$")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_LHS = re.compile(r"^[a-zA-Z]\w*\s*=")


def normalize_answer(answer: str) -> str:
    """Canonical string form of a final answer: ``' \\dfrac{1}{2} '`` and ``'1/2'`` both give ``'\\frac{1}{2}'``."""
    text = to_ascii_digits(str(answer)).strip().replace("\n", "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = re.sub(r"\\text\{\s*[a-zA-Z ]+\}$", "", text) if re.search(r"\d\s*\\text\{\s*[a-zA-Z ]+\}$", text) else text
    text = _TEXT_WRAPPER.sub(r"\1", text)
    for token in _REMOVED_TOKENS:
        text = text.replace(token, "")
    text = text.replace(" ", "")
    if _LHS.match(text) and text.count("=") == 1:  # "x=5" -> "5"
        text = text.split("=", 1)[1]
    text = _FRAC_SHORTHAND.sub(r"\\frac{\1}{\2}", text)
    text = _FRAC_HALF_SHORTHAND_NUM.sub(r"\\frac{\1}\2", text)
    text = _FRAC_HALF_SHORTHAND_DEN.sub(r"\\frac\1{\2}", text)
    slash = _SIMPLE_SLASH.match(text)
    if slash:
        text = f"\\frac{{{slash.group(1)}}}{{{slash.group(2)}}}"
    if text.startswith("."):
        text = "0" + text
    text = text.rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    return text


def as_rational(normalized: str) -> Fraction | None:
    """The exact value of a normalised answer that is a plain number or ``\\frac{a}{b}``, else None."""
    frac = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}", normalized)
    try:
        if frac:
            value = Fraction(int(frac.group(2)), int(frac.group(3)))
            return -value if frac.group(1) else value
        if re.fullmatch(r"-?\d+(\.\d+)?", normalized):
            return Fraction(normalized)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def strings_equivalent(prediction: str, ground_truth: str) -> bool:
    """Equal normal forms, or the same rational value."""
    pred, gold = normalize_answer(prediction), normalize_answer(ground_truth)
    if pred == gold:
        return True
    pred_value, gold_value = as_rational(pred), as_rational(gold)
    return pred_value is not None and pred_value == gold_value
