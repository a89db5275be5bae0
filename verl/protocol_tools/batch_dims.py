"""Folding the batch dimension of a :class:`~verl.protocol.DataProto` into two and back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from verl.protocol import DataProto


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
