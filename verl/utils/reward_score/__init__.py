"""Rule-based answer scorers, picked by a sample's ``data_source`` through a registry.

``default_compute_score(data_source, solution_str, ground_truth, extra_info=None)`` returns a float or a
dict with a ``score`` key plus extra metrics. Register more sources with :func:`register_scorer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Scorer = Callable[[str, str], "float | dict[str, Any]"]

_SCORERS_BY_SOURCE: dict[str, Scorer] = {}
_SCORERS_BY_PREFIX: dict[str, Scorer] = {}


def register_scorer(*data_sources: str, prefix: bool = False) -> Callable[[Scorer], Scorer]:
    """Decorator registering ``fn(solution_str, ground_truth)`` for the given data sources (or prefixes)."""

    def decorate(fn: Scorer) -> Scorer:
        table = _SCORERS_BY_PREFIX if prefix else _SCORERS_BY_SOURCE
        for source in data_sources:
            if source in table and table[source] is not fn:
                raise ValueError(f"a scorer for data source {source!r} is already registered")
            table[source] = fn
        return fn

    return decorate


def get_scorer(data_source: str) -> Scorer:
    """The scorer registered for ``data_source``; unknown sources fail listing the registered ones."""
    if data_source in _SCORERS_BY_SOURCE:
        return _SCORERS_BY_SOURCE[data_source]
    for prefix, scorer in _SCORERS_BY_PREFIX.items():
        if str(data_source).startswith(prefix):
            return scorer
    known = sorted(_SCORERS_BY_SOURCE) + [f"{p}*" for p in sorted(_SCORERS_BY_PREFIX)]
    raise NotImplementedError(
        f"No reward scorer for data_source={data_source!r}. Registered: {known}. Register one with "
        "verl.utils.reward_score.register_scorer or set custom_reward_function.path/name."
    )


def default_compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> float | dict[str, Any]:
    """Score ``solution_str`` against ``ground_truth`` with the scorer registered for ``data_source``."""
    return get_scorer(data_source)(solution_str, ground_truth)


def _register_builtin_scorers() -> None:
    from verl.utils.reward_score import arithmetic, geo3k, gsm8k, math, math_dapo, multiple_choice

    register_scorer("openai/gsm8k")(gsm8k.compute_score)
    register_scorer("lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500", "math_lighteval")(
        math.compute_score
    )
    register_scorer("math_dapo", "math", "math_dapo_reasoning")(math_dapo.compute_score)
    register_scorer("aime", prefix=True)(math_dapo.compute_score)
    register_scorer("arithmetic", "shapes_count")(arithmetic.compute_score)
    register_scorer("hiyouga/geometry3k", "geo3k")(geo3k.compute_score)
    register_scorer("multiple_choice")(multiple_choice.compute_score)


_register_builtin_scorers()

_default_compute_score = default_compute_score  # the name older verl code imports

__all__ = ["default_compute_score", "get_scorer", "register_scorer"]
