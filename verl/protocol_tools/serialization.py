"""Tensors and TensorDicts as plain ``(dtype, shape, bytes)`` triples that any pickler or transport can carry."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDict


def serialize_single_tensor(obj: torch.Tensor) -> tuple[str, tuple[int, ...], np.ndarray]:
    """``(dtype name, shape, uint8 bytes)`` of a tensor: its raw storage as a numpy byte array (any dtype, bf16
    included, round-trips through :func:`deserialize_single_tensor`)."""
    data = obj.detach().cpu().flatten().contiguous().view(torch.uint8).numpy()
    return str(obj.dtype).removeprefix("torch."), tuple(obj.shape), data


def deserialize_single_tensor(arr: tuple[str, tuple[int, ...], Any]) -> torch.Tensor:
    """The tensor of a :func:`serialize_single_tensor` triple (a fresh, writable copy of the bytes)."""
    dtype_name, shape, data = arr
    raw = torch.frombuffer(bytearray(bytes(data)), dtype=torch.uint8)
    return raw.view(getattr(torch, dtype_name)).view(tuple(shape))


def serialize_tensordict(batch: TensorDict) -> tuple[tuple[int, ...], str | None, dict[str, Any]]:
    """``(batch_size, device, {key: triple})``; a nested (jagged) tensor becomes ``(layout, [triple per row])``."""
    encoded: dict[str, Any] = {}
    for key, value in batch.items():
        if value.is_nested:
            rows = [serialize_single_tensor(t) for t in value.unbind()]
            encoded[key] = (str(value.layout).removeprefix("torch."), rows)
        else:
            encoded[key] = serialize_single_tensor(value)
    device = str(batch.device) if batch.device is not None else None
    return tuple(batch.batch_size), device, encoded


def deserialize_tensordict(arr: tuple[tuple[int, ...], str | None, dict[str, Any]]) -> TensorDict:
    """The TensorDict of a :func:`serialize_tensordict` triple."""
    batch_size, device, encoded = arr
    decoded = {}
    for key, value in encoded.items():
        if len(value) == 2:
            layout, rows = value
            decoded[key] = torch.nested.as_nested_tensor(
                [deserialize_single_tensor(row) for row in rows], layout=getattr(torch, layout)
            )
        elif len(value) == 3:
            decoded[key] = deserialize_single_tensor(value)
        else:
            raise ValueError(f"deserialize_tensordict: key {key!r} has an encoding of length {len(value)}, not 2 or 3")
    return TensorDict(source=decoded, batch_size=list(batch_size), device=device)
