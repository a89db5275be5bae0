"""MATH-style scorer: the answer is the content of the last ``\\boxed{...}`` (or ``\\fbox{...}``).

Equivalence goes through ``math-verify`` (symbolic comparison with sympy) when it is installed, after a
cheap string-normalisation check (:mod:`verl.utils.reward_score.math_normalize`) that is also the
fallback without it. Braces are matched by depth, so ``\\boxed{\\frac{1}{2}}`` yields ``\\frac{1}{2}``.
"""

from __future__ import annotations

import threading

from verl.utils.reward_score.math_normalize import strings_equivalent

_BOX_COMMANDS = ("\\boxed", "\\fbox")
# Longer answers skip the symbolic check: sympy on a huge expression can take minutes, and no
# benchmark answer is this long.
MAX_SYMBOLIC_CHARS = 1000


def last_boxed_only_string(text: str) -> str | None:
    """The last ``\\boxed{...}`` / ``\\fbox{...}`` / ``\\boxed x`` in ``text``, braces included, or None."""
    start = max(text.rfind(command) for command in _BOX_COMMANDS)
    if start < 0:
        return None
    command = next(c for c in _BOX_COMMANDS if text.startswith(c, start))
    after = start + len(command)
    if text.startswith(" ", after):  # "\boxed 5": the answer runs to the next '$' or the end
        return command + " " + text[after + 1 :].split("$")[0].strip()
    if not text.startswith("{", after):
        return None
    depth = 0
    for position in range(after, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[start : position + 1]
    return None  # unbalanced braces: no answer


def remove_boxed(boxed: str) -> str:
    """``\\boxed{ans}`` -> ``ans`` (also ``\\fbox{ans}`` and ``\\boxed ans``)."""
    for command in _BOX_COMMANDS:
        if boxed.startswith(command + " "):
            return boxed[len(command) + 1 :]
        if boxed.startswith(command + "{") and boxed.endswith("}"):
            return boxed[len(command) + 1 : -1]
    raise ValueError(f"not a boxed expression: {boxed[:50]!r}")


def is_equiv(prediction: str, ground_truth: str) -> bool:
    """Whether two final answers are the same mathematical object."""
    if strings_equivalent(prediction, ground_truth):
        return True
    if len(prediction) > MAX_SYMBOLIC_CHARS or len(str(ground_truth)) > MAX_SYMBOLIC_CHARS:
        return False
    try:
        from math_verify import parse, verify
    except ImportError:
        return False
    # math-verify bounds its work with SIGALRM, which only the main thread may set.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(f"${ground_truth}$", parsing_timeout=timeout)
    pred = parse(f"${prediction}$", parsing_timeout=timeout)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=timeout))


def compute_score(solution_str: str, ground_truth: str) -> float:
    """1.0 when the last boxed answer equals ``ground_truth``, else 0.0 (also without a boxed answer)."""
    boxed = last_boxed_only_string(solution_str)
    if boxed is None:
        return 0.0
    return 1.0 if is_equiv(remove_boxed(boxed), ground_truth) else 0.0
