"""Multiple-choice scorer: the chosen option letter against the ground-truth letter.

The choice is read, in order of preference, from the last ``\\boxed{X}``, the last ``Answer: X`` (or
``answer is X``), or a response that is only the letter (``X``, ``(X)``, ``X.``). The ground truth may be
``"B"``, ``"(B)"`` or ``"B. text"``. Letters are compared case-insensitively; options run from A to Z.
"""

from __future__ import annotations

import re

from verl.utils.reward_score.math import last_boxed_only_string, remove_boxed

_LETTER = re.compile(r"^\(?([A-Za-z])\)?(?:[.:)]|\s|$)")
_ANSWER = re.compile(r"answer\s*(?:is|:)?\s*:?\s*\(?([A-Za-z])\)?(?![A-Za-z])", re.IGNORECASE)


def option_letter(text: str) -> str | None:
    """The option letter at the start of ``text`` (``B``, ``(B)``, ``B. text``), upper-cased, or None."""
    match = _LETTER.match(text.strip())
    return match.group(1).upper() if match else None


def extract_choice(solution_str: str) -> str | None:
    """The chosen letter of a response, or None when it names none."""
    boxed = last_boxed_only_string(solution_str)
    if boxed is not None:
        letter = option_letter(remove_boxed(boxed))
        if letter:
            return letter
    answers = _ANSWER.findall(solution_str)
    if answers:
        return answers[-1].upper()
    stripped = solution_str.strip()
    return option_letter(stripped) if len(stripped) <= 4 else None


def compute_score(solution_str: str, ground_truth: str) -> dict[str, float]:
    """``{"score": 1.0 if the chosen letter is right else 0.0, "acc": same, "answered": 1.0 if a letter was found}``."""
    expected = option_letter(str(ground_truth))
    if expected is None:
        raise ValueError(f"multiple-choice ground truth {ground_truth!r} is not an option letter (A-Z)")
    choice = extract_choice(solution_str)
    correct = float(choice == expected)
    return {"score": correct, "acc": correct, "answered": float(choice is not None)}
