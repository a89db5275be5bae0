"""Normalising what callers pass as rows: non-tensor columns and row indices."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def to_object_array(key: str, value: Any) -> np.ndarray:
    """Turn a list / array into a numpy object array, keeping one entry per sample."""
    if isinstance(value, np.ndarray) and value.dtype == object:
        return value
    if isinstance(value, np.ndarray):
        return value.astype(object)
    if isinstance(value, (list, tuple)):
        array = np.empty(len(value), dtype=object)
        array[:] = list(value)  # element-wise so that lists of lists stay one object per sample
        return array
    raise TypeError(f"non-tensor key {key!r} must be a numpy array or a list, got {type(value).__name__}")


def as_index_array(indices: Any) -> np.ndarray:
    """An integer index array (numpy) from a tensor / array / list of ints or booleans."""
    if isinstance(indices, torch.Tensor):
        indices = indices.detach().cpu().numpy()
    indices = np.asarray(indices)
    if indices.dtype == bool:
        indices = np.nonzero(indices)[0]
    if indices.ndim != 1:
        raise ValueError(f"index must be one-dimensional, got shape {indices.shape}")
    if indices.size and not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"index must hold integers or booleans, got dtype {indices.dtype}")
    return indices.astype(np.int64)
