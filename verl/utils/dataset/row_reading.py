"""Reading and writing prompt files (parquet, jsonl, json) and checking rows against verl's row schema.

A row is ``{"data_source": str, "prompt": [{"role", "content"}, ...], "ability": str,
"reward_model": {"style": str, "ground_truth": ...}, "extra_info": {...}}``; the prompt key and the
data-source key are configurable (``data.prompt_key``, ``data.reward_fn_key``).
"""

from __future__ import annotations

import json
import os
from typing import Any

SUPPORTED_SUFFIXES = (".parquet", ".jsonl", ".json")


def read_rows(path: str) -> list[dict[str, Any]]:
    """All rows of one parquet / jsonl / json-array file as plain Python dicts."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file {path!r} does not exist (data.train_files / data.val_files)")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.endswith(".jsonl"):
        rows = []
        with open(path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: line {line_number} is not valid JSON: {exc}") from None
        return rows
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as handle:
            rows = json.load(handle)
        if not isinstance(rows, list):
            raise ValueError(f"{path}: a .json data file must hold a list of rows")
        return rows
    raise ValueError(f"data file {path!r}: unsupported format; use one of {SUPPORTED_SUFFIXES}")


def _schema_error(path: str, row_number: int, field: str, problem: str) -> ValueError:
    return ValueError(
        f"{path}: row {row_number} (0-based) {problem} field {field!r}. Every row needs data_source, "
        "prompt (a list of {role, content} chat messages) and reward_model.ground_truth; "
        "see examples/data_preprocess/ for writers of this schema."
    )


def check_row(row: Any, path: str, row_number: int, prompt_key: str, reward_fn_key: str) -> None:
    """Fail naming the file, the row number and the field when ``row`` does not follow the schema."""
    if not isinstance(row, dict):
        raise ValueError(f"{path}: row {row_number} (0-based) is a {type(row).__name__}, not an object")
    if reward_fn_key not in row or row[reward_fn_key] is None:
        raise _schema_error(path, row_number, reward_fn_key, "is missing the")
    messages = row.get(prompt_key)
    if messages is None:
        raise _schema_error(path, row_number, prompt_key, "is missing the")
    if not isinstance(messages, list) or not messages:
        raise _schema_error(path, row_number, prompt_key, "has a non-list or empty")
    for message in messages:
        if not isinstance(message, dict) or "role" not in message or not isinstance(message.get("content"), str):
            raise _schema_error(path, row_number, f"{prompt_key}[].role/content", "has a malformed")
    reward_model = row.get("reward_model")
    if not isinstance(reward_model, dict) or reward_model.get("ground_truth") is None:
        raise _schema_error(path, row_number, "reward_model.ground_truth", "is missing the")
    if row.get("extra_info") is not None and not isinstance(row["extra_info"], dict):
        raise _schema_error(path, row_number, "extra_info", "has a non-object")


def write_parquet(rows: list[dict[str, Any]], path: str) -> None:
    """Write rows to ``path`` as parquet (nested dicts become struct columns), creating its folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
