"""Merging the parts of two DataProtos key by key: a key present in both must hold equal values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict


def values_equal(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN and compares arrays/tensors element-wise."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
        if a_arr.shape != b_arr.shape:
            return False
        return all(values_equal(x, y) for x, y in zip(a_arr.ravel().tolist(), b_arr.ravel().tolist()))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        result = a == b
        return bool(result)
    except (ValueError, TypeError):
        return False


def union_two_dict(dict1: dict, dict2: dict) -> dict:
    """Merge ``dict2`` into ``dict1`` (in place); a key present in both must hold equal values."""
    for key, value in dict2.items():
        if key in dict1 and not values_equal(dict1[key], value):
            raise ValueError(f"union: key {key!r} is in both dicts with different values ({dict1[key]!r} vs {value!r})")
        dict1[key] = value
    return dict1


def union_tensor_dict(tensor_dict1: TensorDict, tensor_dict2: TensorDict) -> TensorDict:
    """Add the keys of ``tensor_dict2`` to ``tensor_dict1`` (in place); shared keys must hold equal tensors."""
    if tensor_dict1.batch_size != tensor_dict2.batch_size:
        raise ValueError(
            f"union: batch sizes differ: {list(tensor_dict1.batch_size)} vs {list(tensor_dict2.batch_size)}"
        )
    for key in tensor_dict2.keys():
        value = tensor_dict2[key]
        if key in tensor_dict1.keys() and not values_equal(tensor_dict1[key], value):
            raise ValueError(f"union: tensor key {key!r} is in both batches with different values")
        tensor_dict1[key] = value
    return tensor_dict1


def union_numpy_dict(tensor_dict1: dict[str, np.ndarray], tensor_dict2: dict[str, np.ndarray]) -> dict:
    """Add the arrays of ``tensor_dict2`` to ``tensor_dict1`` (in place); shared keys must hold equal arrays."""
    for key, value in tensor_dict2.items():
        if key in tensor_dict1:
            if not isinstance(value, np.ndarray) or not isinstance(tensor_dict1[key], np.ndarray):
                raise TypeError(f"union: non-tensor key {key!r} must be a numpy array in both batches")
            if not values_equal(tensor_dict1[key], value):
                raise ValueError(
                    f"union: non-tensor key {key!r} is in both batches with different values "
                    f"(shapes {tensor_dict1[key].shape} and {value.shape})"
                )
        tensor_dict1[key] = value
    return tensor_dict1
