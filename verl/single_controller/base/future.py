"""``DataProtoFuture``: a DataProto that is still being computed by remote workers.

A non-blocking worker-group call returns one of these instead of a ``DataProto``. It holds the ``ray.ObjectRef``
of every worker's output, how to join them (``collect_fn``) and, for a chunk handed to one worker of the next call,
how to cut its share out of the joined result (``dispatch_fn``). It is pickled to the workers of the next call and
materialized there (``@register(materialize_futures=True)``), so the data never passes through the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any


def _concat_data_protos(parts: list) -> Any:
    from verl.protocol import DataProto

    return DataProto.concat(parts)


def _concat_then_unpad(parts: list, pad_size: int) -> Any:
    from verl.protocol import unpad_dataproto

    return unpad_dataproto(_concat_data_protos(parts), pad_size)


def _take_chunk(data: Any, index: int, chunks: int) -> Any:
    return data.chunk(chunks=chunks)[index]


@dataclass
class DataProtoFuture:
    """Outputs of a non-blocking call, joined lazily with ``collect_fn`` and then cut with ``dispatch_fn``.

    ``chunk`` needs the joined length to divide by ``chunks`` (like ``DataProto.chunk``): the driver cannot pad data
    it has not seen, so chain non-blocking calls with batch sizes divisible by the worker count.
    """

    collect_fn: Callable
    futures: list
    dispatch_fn: Callable | None = None

    @staticmethod
    def concat(data: list) -> DataProtoFuture:
        """A future for the row-wise concatenation of the DataProtos behind ``data`` (a list of ObjectRefs)."""
        return DataProtoFuture(collect_fn=_concat_data_protos, futures=list(data))

    @staticmethod
    def concat_unpadded(data: list, pad_size: int) -> DataProtoFuture:
        """Like :meth:`concat`, then drop the ``pad_size`` padding rows the dispatcher appended."""
        if pad_size == 0:
            return DataProtoFuture.concat(data)
        return DataProtoFuture(collect_fn=partial(_concat_then_unpad, pad_size=pad_size), futures=list(data))

    def chunk(self, chunks: int) -> list[DataProtoFuture]:
        """``chunks`` futures, the i-th resolving to ``self.get().chunk(chunks)[i]``."""
        if self.dispatch_fn is not None:
            raise ValueError("DataProtoFuture.chunk: this future is already a chunk; chunk the parent future instead")
        return [
            DataProtoFuture(
                collect_fn=self.collect_fn,
                futures=self.futures,
                dispatch_fn=partial(_take_chunk, index=index, chunks=chunks),
            )
            for index in range(chunks)
        ]

    def get(self) -> Any:
        """Wait for the remote outputs and return the joined (and, for a chunk, cut) DataProto."""
        import ray

        outputs = ray.get(self.futures)
        joined = self.collect_fn(outputs)
        return self.dispatch_fn(joined) if self.dispatch_fn is not None else joined
