"""Rule-based answer scorers, picked by a sample's ``data_source`` through a registry.

``default_compute_score(data_source, solution_str, ground_truth, extra_info=None)`` returns a float or a
dict with a ``score`` key plus extra metrics. Register more sources with :func:`register_scorer`.
"""

from __future__ import annotations

import inspect
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
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    sandbox_fusion_url: str | None = None,
    concurrent_semaphore: Any = None,
    memory_limit_mb: int | None = None,
    **kwargs: Any,
) -> float | dict[str, Any]:
    """Score ``solution_str`` against ``ground_truth`` with the scorer registered for ``data_source``.

    Code sources run the tests in a SandboxFusion server when ``sandbox_fusion_url`` is given (at most
    ``concurrent_semaphore`` requests at once, ``memory_limit_mb`` per run), else in local bounded subprocesses.
    A scorer's tuple result ``(score, ...)`` becomes ``float(score)``; a dict (``{"score": ..., ...}``) is returned
    as it is.
    """
    scorer = get_scorer(data_source)
    context = {
        "sandbox_fusion_url": sandbox_fusion_url,
        "concurrent_semaphore": concurrent_semaphore,
        "memory_limit_mb": memory_limit_mb,
    }
    accepted = inspect.signature(scorer).parameters
    result = scorer(solution_str, ground_truth, **{k: v for k, v in context.items() if k in accepted})
    if isinstance(result, dict):
        return result
    if isinstance(result, tuple | list):
        result = result[0]
    return float(result)


def _code_score(
    solution_str: str,
    ground_truth: Any,
    sandbox_fusion_url: str | None = None,
    concurrent_semaphore: Any = None,
    memory_limit_mb: int | None = None,
) -> float:
    """Fraction of passed tests of a code response: remotely with a sandbox URL, else in local subprocesses."""
    if sandbox_fusion_url:
        from verl.utils.reward_score import sandbox_fusion

        score, _ = sandbox_fusion.compute_score(
            sandbox_fusion_url, concurrent_semaphore, memory_limit_mb or 1024, solution_str, ground_truth, True
        )
        return score
    from verl.utils.reward_score import prime_code

    score, _ = prime_code.compute_score(solution_str, ground_truth, continuous=True)
    return score


def _register_builtin_scorers() -> None:
    from verl.utils.reward_score import (
        arithmetic,
        geo3k,
        gsm8k,
        math,
        math_dapo,
        multiple_choice,
        prime_math,
        search_r1_like_qa_em,
    )

    register_scorer("openai/gsm8k")(gsm8k.compute_score)
    register_scorer("lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500", "math_lighteval")(
        math.compute_score
    )
    register_scorer("math_dapo", "math", "math_dapo_reasoning")(math_dapo.compute_score)
    register_scorer("aime", prefix=True)(math_dapo.compute_score)
    register_scorer("arithmetic", "shapes_count")(arithmetic.compute_score)
    register_scorer("hiyouga/geometry3k", "geo3k")(geo3k.compute_score)
    register_scorer("multiple_choice")(multiple_choice.compute_score)
    register_scorer(
        "numina_aops_forum",
        "numina_synthetic_math",
        "numina_amc_aime",
        "numina_synthetic_amc",
        "numina_cn_k12",
        "numina_olympiads",
    )(prime_math.compute_score)
    register_scorer("codecontests", "apps", "codeforces", "taco")(_code_score)
    register_scorer(
        "searchR1_nq",
        "searchR1_triviaqa",
        "searchR1_popqa",
        "searchR1_hotpotqa",
        "searchR1_2wikimultihopqa",
        "searchR1_musique",
        "searchR1_bamboogle",
    )(search_r1_like_qa_em.compute_score)


_register_builtin_scorers()

_default_compute_score = default_compute_score  # the name older verl code imports

__all__ = ["default_compute_score", "get_scorer", "register_scorer"]
