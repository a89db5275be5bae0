"""verl's ``verl.utils.tensordict_utils``: TensorDicts that carry per-sample python objects and batch-wide metadata.

A per-sample python value (a list of messages, a dict of scores) is stored as a ``NonTensorStack`` (one
``NonTensorData`` per row); a batch-wide value (a temperature, a flag) as one ``NonTensorData``. The getters unwrap
both back to plain python. Nested (jagged) tensors are supported where noted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from tensordict import TensorDict
from tensordict.tensorclass import NonTensorData, NonTensorStack

__all__ = [
    "assert_tensordict_eq",
    "assign_non_tensor",
    "assign_non_tensor_data",
    "assign_non_tensor_stack",
    "concat_nested_tensors",
    "concat_tensordict",
    "get",
    "get_keys",
    "get_non_tensor_data",
    "get_tensordict",
    "index_select_tensor_dict",
    "make_iterator",
    "pad_to_divisor",
    "pop",
    "pop_keys",
    "union_tensor_dict",
    "unpad",
    "unwrap_non_tensor_data",
]


def _require_tensordict(value: Any) -> None:
    if not isinstance(value, TensorDict):
        raise TypeError(f"expected a TensorDict, got {type(value).__name__}")


def _stack(values: list) -> NonTensorStack:
    return NonTensorStack.from_list([NonTensorData(v) for v in values])


def assign_non_tensor_data(tensor_dict: TensorDict, key: str, val: Any) -> None:
    """Store one batch-wide python value under ``key``."""
    _require_tensordict(tensor_dict)
    tensor_dict[key] = NonTensorData(val)


def assign_non_tensor_stack(tensor_dict: TensorDict, key: str, val: list) -> None:
    """Store one python value per row (nested lists and dicts included) under ``key``."""
    _require_tensordict(tensor_dict)
    tensor_dict[key] = _stack(list(val))


def assign_non_tensor(tensor_dict: TensorDict, **kwargs: Any) -> TensorDict:
    """Store each keyword: lists per row (``NonTensorStack``), anything else batch-wide (``NonTensorData``)."""
    _require_tensordict(tensor_dict)
    for key, val in kwargs.items():
        if isinstance(val, NonTensorData | NonTensorStack):
            tensor_dict[key] = val
        elif isinstance(val, list):
            assign_non_tensor_stack(tensor_dict, key, val)
        else:
            assign_non_tensor_data(tensor_dict, key, val)
    return tensor_dict


def unwrap_non_tensor_data(data: Any) -> Any:
    """The python value inside a ``NonTensorData``; anything else unchanged."""
    return data.data if isinstance(data, NonTensorData) else data


def get_non_tensor_data(data: TensorDict, key: str, default: Any) -> Any:
    """The batch-wide value under ``key`` (``default`` when absent)."""
    return unwrap_non_tensor_data(data.get(key, default))


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and not isinstance(value, NonTensorData | NonTensorStack):
        return value
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return unwrap_non_tensor_data(value)


def get(tensordict: TensorDict, key: str, default: Any = None) -> Any:
    """``tensordict[key]`` as a tensor, a python list (per-row values) or the python value (batch-wide)."""
    if key not in tensordict.keys():
        return default
    return _plain(tensordict.get(key))


def pop(tensordict: TensorDict, key: str, default: Any = None) -> Any:
    """Like :func:`get`, removing the key."""
    if key not in tensordict.keys():
        return default
    return _plain(tensordict.pop(key))


def _split_keys(tensordict: TensorDict, keys: Iterable[str], remove: bool) -> TensorDict:
    per_row: dict[str, Any] = {}
    batch_wide: dict[str, Any] = {}
    for key in keys:
        if key not in tensordict.keys():
            raise KeyError(f"key {key!r} not in the TensorDict (keys: {sorted(tensordict.keys())})")
        value = tensordict.pop(key) if remove else tensordict.get(key)
        if isinstance(value, NonTensorData):
            batch_wide[key] = value.data
        else:
            per_row[key] = _plain(value)
    return get_tensordict(per_row, batch_wide)


def get_keys(tensordict: TensorDict, keys: Iterable[str]) -> TensorDict:
    """A new TensorDict with only ``keys`` (per-row and batch-wide values kept apart)."""
    return _split_keys(tensordict, keys, remove=False)


def pop_keys(tensordict: TensorDict, keys: Iterable[str]) -> TensorDict:
    """Like :func:`get_keys`, removing the keys from ``tensordict``."""
    return _split_keys(tensordict, keys, remove=True)


def get_tensordict(tensor_dict: dict[str, torch.Tensor | list], non_tensor_dict: dict | None = None) -> TensorDict:
    """A TensorDict of per-row ``tensor_dict`` values (tensors, nested tensors, python lists: all the same length)
    and batch-wide ``non_tensor_dict`` values."""
    source: dict[str, Any] = {}
    batch_size = None
    for key, val in tensor_dict.items():
        if isinstance(val, list):
            if any(isinstance(v, torch.Tensor) for v in val):
                raise TypeError(f"{key}: a list becomes per-row python values; pass tensors as one tensor instead")
            source[key], length = _stack(val), len(val)
        elif isinstance(val, NonTensorStack):
            source[key], length = val, len(val)
        elif isinstance(val, torch.Tensor):
            if val.is_nested and not val.is_contiguous():
                raise ValueError(f"{key}: nested tensors must be contiguous (layout=torch.jagged)")
            source[key], length = val, val.size(0)
        else:
            raise TypeError(f"{key}: expected a tensor or a list, got {type(val).__name__}")
        if batch_size is not None and length != batch_size:
            raise ValueError(f"{key} has {length} rows but the other values have {batch_size}")
        batch_size = length
    for key, val in (non_tensor_dict or {}).items():
        if key in source:
            raise ValueError(f"{key} is both a per-row and a batch-wide value")
        source[key] = NonTensorData(val)
    return TensorDict(source=source, batch_size=[] if batch_size is None else [batch_size])


def concat_nested_tensors(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Row-wise concatenation of 2-d jagged nested tensors."""
    rows = []
    for tensor in tensors:
        if not (tensor.is_nested and tensor.dim() == 2):
            raise ValueError("concat_nested_tensors takes 2-d nested (jagged) tensors")
        rows.extend(tensor.unbind(0))
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def concat_tensordict(data: list[TensorDict]) -> TensorDict:
    """Row-wise concatenation of TensorDicts with the same keys (nested tensors included)."""
    if not data:
        raise ValueError("concat_tensordict needs at least one TensorDict")
    nested = {k for k, v in data[0].items() if isinstance(v, torch.Tensor) and v.is_nested}
    if not nested:
        return TensorDict.cat(data, dim=0)
    regular = [TensorDict({k: v for k, v in td.items() if k not in nested}, batch_size=td.batch_size) for td in data]
    output = TensorDict.cat(regular, dim=0)
    for key in nested:
        output[key] = concat_nested_tensors([td[key] for td in data])
    return output


def index_select_tensor_dict(batch: TensorDict, indices: torch.Tensor | list[int]) -> TensorDict:
    """Rows ``indices`` of ``batch`` (nested tensors and per-row python values included; batch-wide values kept)."""
    index = torch.as_tensor(indices)
    if index.dim() != 1:
        raise ValueError("indices must be 1-d")
    selected: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, NonTensorData):
            selected[key] = value
        elif isinstance(value, NonTensorStack):
            rows = value.tolist()
            selected[key] = _stack([rows[i] for i in index.tolist()])
        elif value.is_nested:
            rows = value.unbind(0)
            selected[key] = torch.nested.as_nested_tensor([rows[i] for i in index.tolist()], layout=torch.jagged)
        else:
            selected[key] = value[index]
    return TensorDict(source=selected, batch_size=[index.shape[0]])


def union_tensor_dict(tensor_dict1: TensorDict, tensor_dict2: TensorDict) -> TensorDict:
    """Add ``tensor_dict2``'s keys to ``tensor_dict1`` (in place); shared keys must hold equal values."""
    if tensor_dict1.batch_size != tensor_dict2.batch_size:
        raise ValueError(f"batch sizes differ: {tensor_dict1.batch_size} vs {tensor_dict2.batch_size}")
    for key in tensor_dict2.keys():
        if key not in tensor_dict1.keys():
            tensor_dict1[key] = tensor_dict2.get(key)
            continue
        first, second = _plain(tensor_dict1.get(key)), _plain(tensor_dict2.get(key))
        same = first.equal(second) if isinstance(first, torch.Tensor) else first == second
        if not same:
            raise ValueError(f"key {key!r} holds different values in the two TensorDicts")
    return tensor_dict1


def make_iterator(
    tensordict: TensorDict, mini_batch_size: int, epochs: int, seed: int | None = None, dataloader_kwargs=None
) -> Iterator[TensorDict]:
    """Mini-batches of ``mini_batch_size`` rows over ``epochs`` passes (shuffled with ``seed`` when
    ``dataloader_kwargs`` has ``shuffle=True``)."""
    from torch.utils.data import DataLoader

    if tensordict.batch_size[0] % mini_batch_size:
        raise ValueError(f"{tensordict.batch_size[0]} rows do not split into mini-batches of {mini_batch_size}")
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    loader = DataLoader(
        tensordict, batch_size=mini_batch_size, collate_fn=lambda x: x, generator=generator, **(dataloader_kwargs or {})
    )

    def batches() -> Iterator[TensorDict]:
        for _ in range(epochs):
            yield from loader

    return batches()


def assert_tensordict_eq(tensordict1: TensorDict, tensordict2: TensorDict) -> None:
    """Fail naming the first key whose values differ (nested tensors compared row by row)."""
    keys1, keys2 = set(tensordict1.keys()), set(tensordict2.keys())
    assert keys1 == keys2, f"key sets differ: {sorted(keys1 ^ keys2)}"
    for key in keys1:
        first, second = tensordict1.get(key), tensordict2.get(key)
        assert type(first) is type(second), f"{key}: {type(first).__name__} vs {type(second).__name__}"
        if isinstance(first, torch.Tensor) and not isinstance(first, NonTensorData | NonTensorStack):
            if first.is_nested:
                rows1, rows2 = first.unbind(), second.unbind()
                assert len(rows1) == len(rows2) and all(torch.equal(a, b) for a, b in zip(rows1, rows2)), key
            else:
                assert torch.equal(first, second), f"{key} differs"
        else:
            assert _plain(first) == _plain(second), f"{key} differs"


def pad_to_divisor(data: TensorDict, size_divisor: int) -> tuple[TensorDict, int]:
    """Append copies of the first rows (cycling) until the length is a multiple of ``size_divisor``; returns
    ``(padded, pad_size)``."""
    _require_tensordict(data)
    size = len(data)
    pad_size = (-size) % size_divisor
    if pad_size == 0:
        return data, 0
    if size == 0:
        raise ValueError(f"cannot pad an empty TensorDict to a multiple of {size_divisor}")
    rows = [i % size for i in range(pad_size)]
    return torch.cat([data, index_select_tensor_dict(data, rows)]), pad_size


def unpad(data: TensorDict, pad_size: int) -> TensorDict:
    """Drop the ``pad_size`` last rows that :func:`pad_to_divisor` appended."""
    return data[: len(data) - pad_size] if pad_size else data
