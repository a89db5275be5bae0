"""Row bookkeeping behind DataProto's joining and mini-batch iteration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from verl.protocol import DataProto


def check_same_keys(parts: Sequence[DataProto]) -> None:
    """Raise ValueError naming the first part whose tensor or non-tensor keys differ from part 0's."""
    first = parts[0]
    tensor_keys = set(first.batch.keys()) if first.batch is not None else set()
    for position, part in enumerate(parts[1:], start=1):
        part_keys = set(part.batch.keys()) if part.batch is not None else set()
        if part_keys != tensor_keys:
            diff = sorted(part_keys ^ tensor_keys)
            raise ValueError(f"concat: part {position} differs from part 0 in tensor keys {diff}")
        if set(part.non_tensor_batch) != set(first.non_tensor_batch):
            diff = sorted(set(part.non_tensor_batch) ^ set(first.non_tensor_batch))
            raise ValueError(f"concat: part {position} differs from part 0 in non-tensor keys {diff}")


def _as_row_array(rows: list[int]) -> np.ndarray:
    return np.asarray(rows, dtype=np.int64)


def mini_batch_rows(
    size: int, mini_batch_size: int, seed: int | None = None, dataloader_kwargs: dict | None = None
) -> torch.utils.data.DataLoader:
    """A DataLoader over the row numbers ``0..size-1`` that yields ``(mini_batch_size,)`` int64 arrays.

    ``dataloader_kwargs`` go to :class:`torch.utils.data.DataLoader` (e.g. ``{"shuffle": True}``); ``seed`` seeds
    its generator so the order is reproducible.
    """
    if mini_batch_size <= 0 or size % mini_batch_size != 0:
        raise ValueError(f"make_iterator: batch size {size} is not divisible by mini_batch_size {mini_batch_size}")
    generator = None
    if seed is not None:
        generator = torch.Generator()
        generator.manual_seed(seed)
    return torch.utils.data.DataLoader(
        dataset=range(size),
        batch_size=mini_batch_size,
        collate_fn=_as_row_array,
        generator=generator,
        **(dataloader_kwargs or {}),
    )
