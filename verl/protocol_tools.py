"""Helpers around :class:`~verl.protocol.DataProto` that verl exports from ``verl.protocol``: the auto-padding switch,
tensor / TensorDict serialisation, batch-dimension folding and the all-gather of a DataProto over a process group.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict

if TYPE_CHECKING:
    from verl.protocol import DataProto

AUTO_PADDING_KEY = "_verl_auto_padding"
"""``meta_info`` key (and :class:`DataProtoConfig` entry) that enables auto-padding for one DataProto."""


class _DataProtoConfigMeta(type):
    _config: dict[str, Any] = {}
    auto_padding_key = AUTO_PADDING_KEY

    @property
    def auto_padding(cls) -> bool:
        """Global auto-padding: ``DataProtoConfig.auto_padding = True`` or the env ``VERL_AUTO_PADDING=1|true``."""
        enabled_by_env = os.getenv("VERL_AUTO_PADDING", "FALSE").upper() in ("TRUE", "1")
        return enabled_by_env or bool(cls._config.get(AUTO_PADDING_KEY, False))

    @auto_padding.setter
    def auto_padding(cls, enabled: bool) -> None:
        cls._config[AUTO_PADDING_KEY] = bool(enabled)


class DataProtoConfig(metaclass=_DataProtoConfigMeta):
    """Process-wide DataProto switches. With auto-padding on, ``DataProto.chunk(k)`` accepts a length that ``k``
    does not divide and returns ``torch.chunk``-sized parts (the first ones one row longer)."""


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


def fold_batch_dim(data: DataProto, new_batch_size: int) -> DataProto:
    """Reshape rows ``(bs, ...)`` to ``(new_batch_size, bs // new_batch_size, ...)`` in tensors and non-tensors."""
    size = len(data)
    if new_batch_size <= 0 or size % new_batch_size:
        raise ValueError(f"fold_batch_dim: batch size {size} is not divisible by new_batch_size={new_batch_size}")
    tensors = data.batch.view(new_batch_size, -1)
    tensors.auto_batch_size_(batch_dims=1)
    non_tensors = {k: np.reshape(v, (new_batch_size, -1, *v.shape[1:])) for k, v in data.non_tensor_batch.items()}
    return type(data)(batch=tensors, non_tensor_batch=non_tensors, meta_info=data.meta_info)


def unfold_batch_dim(data: DataProto, batch_dims: int = 2) -> DataProto:
    """Flatten the first ``batch_dims`` dimensions back into one batch dimension (inverse of :func:`fold_batch_dim`)."""
    tensors = data.batch
    tensors.auto_batch_size_(batch_dims=batch_dims)
    tensors = tensors.view(-1)
    size = tensors.batch_size[0]
    non_tensors = {k: np.reshape(v, (size, *v.shape[batch_dims:])) for k, v in data.non_tensor_batch.items()}
    return type(data)(batch=tensors, non_tensor_batch=non_tensors, meta_info=data.meta_info)


def all_gather_data_proto(data: DataProto, process_group=None) -> None:
    """Replace ``data``'s rows, in place, by the rows of every rank of ``process_group`` in rank order (ranks may
    hold different numbers of rows).

    Tensors are all-gathered on the collective's device (padded to the longest rank) and moved back; non-tensors
    travel as python objects.
    """
    import torch.distributed as dist

    from verl.utils.device import current_device

    world = dist.get_world_size(group=process_group)
    local = {"rows": len(data), "non_tensor_batch": data.non_tensor_batch}
    gathered_objects: list[Any] = [None] * world
    dist.all_gather_object(gathered_objects, local, group=process_group)
    rows = [part["rows"] for part in gathered_objects]
    if data.batch is not None:
        previous = data.batch.device or torch.device("cpu")
        longest = max(rows)
        tensors = {}
        for key, tensor in data.batch.items():
            tensor = tensor.contiguous().to(current_device())
            padded = torch.zeros((longest, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
            padded[: tensor.shape[0]] = tensor
            parts = [torch.empty_like(padded) for _ in range(world)]
            dist.all_gather(parts, padded, group=process_group)
            tensors[key] = torch.cat([part[:count] for part, count in zip(parts, rows)]).to(previous)
        data.batch = TensorDict(source=tensors, batch_size=[sum(rows)])
    data.non_tensor_batch = {
        key: np.concatenate([part["non_tensor_batch"][key] for part in gathered_objects], axis=0)
        for key in data.non_tensor_batch
    }
