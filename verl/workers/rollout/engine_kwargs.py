"""``rollout.engine_kwargs.<backend>``: the extra engine arguments a user passes through, checked by name.

Each engine backend compares the keys with the argument names its engine accepts (``vllm.EngineArgs`` fields,
SGLang ``ServerArgs`` fields) before starting, so a typo fails with the nearest valid name instead of deep inside
the engine.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def backend_kwargs(config: Any, backend: str) -> dict[str, Any]:
    """``config.engine_kwargs[backend]`` as a plain dict without ``None`` values (YAML ``null`` means "unset")."""
    engine_kwargs = getattr(config, "engine_kwargs", None) or {}
    values = engine_kwargs.get(backend, None) or {}
    return {key: value for key, value in dict(values).items() if value is not None}


def check_kwarg_names(kwargs: dict[str, Any], known: Iterable[str], backend: str, engine_args: str) -> None:
    """Raise ``ValueError`` naming every key of ``kwargs`` that is not in ``known`` (with the nearest valid name)."""
    known = sorted(known)
    problems = []
    for key in sorted(set(kwargs) - set(known)):
        nearest = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {nearest[0]!r}" if nearest else ""
        key_path = f"actor_rollout_ref.rollout.engine_kwargs.{backend}.{key}"
        problems.append(f"{key_path} is not an argument of {engine_args}{hint}")
    if problems:
        raise ValueError("; ".join(problems))
