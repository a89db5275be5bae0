"""Checks of the data files that run before Ray starts: each exists, has a supported format, and its first rows
follow verl's row schema (:func:`verl.utils.dataset.row_reading.check_row`).

Only the first :data:`ROWS_CHECKED` rows of a file are read here (a large parquet file stays cheap); the dataset
checks every row when it loads. Built-in data (``builtin://``) is generated on demand and remote paths
(``hdfs://``, ``s3://``, ...) are left to the loader; a user dataset class (``data.custom_cls``) reads its own
schema, so only existence is checked for it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from verl.utils.dataset.row_reading import SUPPORTED_SUFFIXES, check_row

ROWS_CHECKED = 16
"""Rows of each file whose schema is checked before Ray starts."""


def _first_rows(path: str) -> list[Any]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        batches = pq.ParquetFile(path).iter_batches(batch_size=ROWS_CHECKED)
        batch = next(batches, None)
        return [] if batch is None else batch.to_pylist()
    rows: list[Any] = []
    if path.endswith(".jsonl"):
        with open(path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if len(rows) == ROWS_CHECKED:
                    break
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}: line {line_number} is not valid JSON: {exc}") from None
        return rows
    with open(path, encoding="utf-8") as handle:
        rows = json.load(handle)
    if not isinstance(rows, list):
        raise ValueError(f"{path}: a .json data file must hold a list of rows")
    return rows[:ROWS_CHECKED]


def _missing_hint(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"its folder {folder} does not exist either"
    present = sorted(name for name in os.listdir(folder) if name.endswith(SUPPORTED_SUFFIXES))
    if not present:
        return f"{folder} holds no data files ({', '.join(SUPPORTED_SUFFIXES)})"
    return f"data files in {folder}: {', '.join(present[:10])}{' ...' if len(present) > 10 else ''}"


def data_file_errors(key: str, files: Any, prompt_key: str, reward_fn_key: str, check_schema: bool) -> list[str]:
    """One message per problem of the files of ``key`` (``data.train_files`` / ``data.val_files``)."""
    if files is None:
        return []
    errors = []
    for path in [files] if isinstance(files, str) else list(files):
        path = str(path)
        if path.startswith("builtin://") or "://" in path:
            continue
        path = os.path.expanduser(path)
        if not os.path.isfile(path):
            errors.append(f"{key}: {path} does not exist ({_missing_hint(path)})")
            continue
        if not path.endswith(SUPPORTED_SUFFIXES):
            errors.append(f"{key}: {path} has an unsupported format; use one of {', '.join(SUPPORTED_SUFFIXES)}")
            continue
        if not check_schema:
            continue
        try:
            rows = _first_rows(path)
            if not rows:
                errors.append(f"{key}: {path} holds no rows")
            for row_number, row in enumerate(rows):
                check_row(row, path, row_number, prompt_key, reward_fn_key)
        except (ValueError, OSError) as exc:
            errors.append(f"{key}: {exc}")
    return errors


def check_data_files(data: Any) -> list[str]:
    """Problems of ``data.train_files`` and ``data.val_files`` (a :class:`~verl.trainer.config.data.DataConfig`)."""
    check_schema = not data.custom_cls.path
    errors = data_file_errors("data.train_files", data.train_files, data.prompt_key, data.reward_fn_key, check_schema)
    errors += data_file_errors("data.val_files", data.val_files, data.prompt_key, data.reward_fn_key, check_schema)
    return errors
