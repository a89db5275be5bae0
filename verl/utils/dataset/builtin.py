"""Sentinel data paths: ``builtin://<task>/<split>`` names a task generated into the cache on first use.

``builtin://arithmetic/train`` and ``builtin://arithmetic/test`` are the defaults of ``data.train_files``
and ``data.val_files``; ``builtin://shapes/...`` is the visual counting task (:mod:`verl.utils.dataset.shapes`).
:func:`resolve_data_files` replaces them by parquet files under
``<cache_dir>/data/<task>/``, written once through a temporary file that is renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUILTIN_PREFIX = "builtin://"

# task name -> (file-format version, fn(split) -> rows). Bump the version when the rows change.
_BUILTIN_TASKS: dict[str, tuple[str, Callable[[str], list[dict[str, Any]]]]] = {}


def register_builtin_task(name: str, version: str, make_split: Callable[[str], list[dict[str, Any]]]) -> None:
    """Make ``builtin://<name>/<split>`` resolvable; ``make_split(split)`` returns the rows of a split."""
    _BUILTIN_TASKS[name] = (version, make_split)


def _arithmetic_split(split: str) -> list[dict[str, Any]]:
    from verl.utils.dataset.arithmetic import make_split

    return make_split(split)


def _shapes_split(split: str) -> list[dict[str, Any]]:
    from verl.utils.dataset.shapes import make_split

    return make_split(split)


register_builtin_task("arithmetic", "v4", _arithmetic_split)
register_builtin_task("shapes", "v1", _shapes_split)


def builtin_file(uri: str) -> str:
    """The parquet path of a ``builtin://<task>/<split>`` URI, generating it if missing."""
    from verl.utils.dataset.row_reading import write_parquet
    from verl.utils.default_model import cache_dir

    task, _, split = uri[len(BUILTIN_PREFIX) :].partition("/")
    if task not in _BUILTIN_TASKS or split not in ("train", "test"):
        raise ValueError(
            f"unknown built-in data {uri!r}; available: "
            f"{[f'{BUILTIN_PREFIX}{name}/{s}' for name in sorted(_BUILTIN_TASKS) for s in ('train', 'test')]}"
        )
    version, make_split = _BUILTIN_TASKS[task]
    target = cache_dir() / "data" / task / f"{split}-{version}.parquet"
    if target.exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{split}-", suffix=".parquet", dir=target.parent)
    os.close(handle)
    try:
        write_parquet(make_split(split), tmp)
        os.replace(tmp, target)  # atomic: readers see the whole file or none
    finally:
        Path(tmp).unlink(missing_ok=True)
    return str(target)


def resolve_data_files(files: str | list[str]) -> list[str]:
    """Data file paths with ``builtin://`` sentinels replaced by generated parquet files and ``~`` expanded."""
    paths = [files] if isinstance(files, str) else [str(f) for f in files]
    return [builtin_file(p) if p.startswith(BUILTIN_PREFIX) else os.path.expanduser(p) for p in paths]
