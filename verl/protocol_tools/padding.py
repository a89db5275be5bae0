"""Padding a DataProto to a multiple of the worker count before dispatch, and dropping the padding after."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from verl.protocol import DataProto


def pad_dataproto_to_divisor(data: DataProto, size_divisor: int) -> tuple[DataProto, int]:
    """Append copies of the first rows (cycling) so that ``len`` becomes a multiple of ``size_divisor``.

    Returns ``(padded, pad_size)``; :func:`unpad_dataproto` drops the ``pad_size`` last rows again.
    """
    if not isinstance(size_divisor, int) or size_divisor <= 0:
        raise ValueError(f"pad_dataproto_to_divisor: size_divisor must be a positive int, got {size_divisor!r}")
    size = len(data)
    pad_size = (-size) % size_divisor
    if pad_size == 0:
        return data, 0
    if size == 0:
        raise ValueError(f"pad_dataproto_to_divisor: cannot pad an empty DataProto to a multiple of {size_divisor}")
    pad_rows = np.arange(pad_size) % size
    return type(data).concat([data, data.select_idxs(pad_rows)]), pad_size


def unpad_dataproto(data: DataProto, pad_size: int) -> DataProto:
    """Drop the ``pad_size`` rows that :func:`pad_dataproto_to_divisor` appended."""
    if pad_size < 0 or pad_size > len(data):
        raise ValueError(f"unpad_dataproto: pad_size {pad_size} is outside [0, {len(data)}]")
    return data[: len(data) - pad_size] if pad_size else data
