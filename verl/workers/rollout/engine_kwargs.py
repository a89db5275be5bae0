"""``rollout.engine_kwargs.<backend>``: the extra engine arguments a user passes through, checked by name.

Each engine backend compares the keys with the argument names its engine accepts (``vllm.EngineArgs`` fields,
SGLang ``ServerArgs`` fields) before starting, so a typo fails with the nearest valid name instead of deep inside
the engine. :func:`engine_kwargs_errors` makes the same check before Ray starts, reading the argument names from
the installed engine's source (importing vLLM or SGLang would import torch into the validating process).
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verl.workers.config.rollout import RolloutConfig


def backend_kwargs(config: RolloutConfig, backend: str) -> dict[str, Any]:
    """``config.engine_kwargs[backend]`` as a plain dict without ``None`` values (YAML ``null`` means "unset")."""
    engine_kwargs = config.engine_kwargs or {}
    values = engine_kwargs.get(backend, None) or {}
    return {key: value for key, value in dict(values).items() if value is not None}


ENGINE_ARGUMENTS: dict[str, tuple[str, str, str, str]] = {
    "vllm": ("vllm", "engine/arg_utils.py", "EngineArgs", "vllm.EngineArgs"),
    "sglang": ("sglang", "srt/server_args.py", "ServerArgs", "sglang's ServerArgs"),
}
"""Backend -> (package, file in it, dataclass of the engine's arguments, name for messages)."""


def unknown_kwarg_errors(
    kwargs: dict[str, Any],
    known: Iterable[str],
    backend: str,
    engine_args: str,
    prefix: str = "actor_rollout_ref.rollout",
) -> list[str]:
    """One message per key of ``kwargs`` not in ``known``, naming the nearest valid name."""
    known = sorted(known)
    problems = []
    for key in sorted(set(kwargs) - set(known)):
        nearest = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {nearest[0]!r}" if nearest else ""
        problems.append(f"{prefix}.engine_kwargs.{backend}.{key} is not an argument of {engine_args}{hint}")
    return problems


def check_kwarg_names(kwargs: dict[str, Any], known: Iterable[str], backend: str, engine_args: str) -> None:
    """Raise ``ValueError`` naming every key of ``kwargs`` that is not in ``known`` (with the nearest valid name)."""
    problems = unknown_kwarg_errors(kwargs, known, backend, engine_args)
    if problems:
        raise ValueError("; ".join(problems))


def static_dataclass_fields(package: str, relative_path: str, class_name: str) -> set[str] | None:
    """Field names of dataclass ``class_name`` in ``relative_path`` of the installed ``package``, read from its
    source without importing it; None when the package or the class is not found."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative_path
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
    return None


def engine_kwargs_errors(config: RolloutConfig, prefix: str = "actor_rollout_ref.rollout") -> list[str]:
    """``engine_kwargs.<name>`` entries of the selected engine that it does not accept (checked when that engine
    is installed here; otherwise the worker that builds it checks)."""
    if config.name not in ENGINE_ARGUMENTS:
        return []
    package, relative_path, class_name, engine_args = ENGINE_ARGUMENTS[config.name]
    known = static_dataclass_fields(package, relative_path, class_name)
    if known is None:
        return []
    return unknown_kwarg_errors(backend_kwargs(config, config.name), known, config.name, engine_args, prefix)
