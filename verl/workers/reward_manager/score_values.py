"""What a reward function may return, and the check that turns a result into ``(score, extra metrics)``.

A reward is a finite real number: ``int``, ``float``, ``bool``, a numpy scalar or a one-element tensor / array; or a
dict whose ``score`` is one (its other keys are per-sample metrics, e.g. ``acc``). Anything else is refused,
including strings such as ``"1.0"`` (a function that formats its result is a bug, and ``"correct"`` would fail
later without naming the function) and NaN or infinity (they would turn the loss into NaN).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

EXPECTED = "a finite number (int, float, bool) or a dict with a finite numeric 'score'"
"""The accepted return values, for error messages."""


class InvalidScore(ValueError):
    """A reward function returned something that is not a reward; the message says what it returned."""


def _short_repr(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_number(value: Any, where: str) -> float:
    """``value`` as a finite float, or :class:`InvalidScore` naming its type and value (``where`` prefixes it)."""
    if isinstance(value, str | bytes):
        raise InvalidScore(f"returned {where}the string {_short_repr(value)}; a reward must be {EXPECTED}")
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalars, tensors and arrays
        count = value.numel() if hasattr(value, "numel") else value.size
        if count != 1:
            raise InvalidScore(
                f"returned {where}a {type(value).__name__} of {count} elements; a reward must be {EXPECTED}"
            )
        value = value.item()
    if isinstance(value, complex) or not isinstance(value, numbers.Real):
        raise InvalidScore(f"returned {where}{type(value).__name__} {_short_repr(value)}; a reward must be {EXPECTED}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidScore(f"returned {where}{number}; a reward must be {EXPECTED}")
    return number


def parse_score(result: Any) -> tuple[float, dict[str, Any]]:
    """``(score, extra metrics)`` of one result: a number gives no extras, a dict gives all its keys."""
    if isinstance(result, dict):
        if "score" not in result:
            raise InvalidScore(f"returned a dict without a 'score' key (keys {sorted(map(str, result))})")
        return _as_number(result["score"], "a dict whose 'score' is "), dict(result)
    return _as_number(result, ""), {}
