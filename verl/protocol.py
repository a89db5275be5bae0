"""DataProto: the batch container passed between the driver and the workers.

A ``DataProto`` holds three things that travel together:

- ``batch``: a :class:`tensordict.TensorDict` whose first dimension is the batch (``batch_size == [bs]``);
- ``non_tensor_batch``: ``{name: np.ndarray(dtype=object, shape=(bs, ...))}`` for strings, dicts, lists;
- ``meta_info``: a plain dict of values that describe the whole batch (temperature, eos id, metrics...).

Every row-wise operation (slicing, chunking, repeating, reordering) applies to ``batch`` and
``non_tensor_batch`` alike, so row ``i`` of every tensor and every numpy array always describes the same sample.
Errors name the offending key and the sizes involved.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from verl.protocol_tools.batch_dims import fold_batch_dim, unfold_batch_dim
from verl.protocol_tools.config import AUTO_PADDING_KEY, DataProtoConfig
from verl.protocol_tools.distributed import all_gather_data_proto
from verl.protocol_tools.indexing import as_index_array, to_object_array
from verl.protocol_tools.padding import pad_dataproto_to_divisor, unpad_dataproto
from verl.protocol_tools.pickling import decode_batch, encode_batch
from verl.protocol_tools.rows import check_same_keys, mini_batch_rows
from verl.protocol_tools.serialization import (
    deserialize_single_tensor,
    deserialize_tensordict,
    serialize_single_tensor,
    serialize_tensordict,
)
from verl.protocol_tools.unions import union_numpy_dict, union_tensor_dict, union_two_dict

__all__ = [
    "DataProto",
    "DataProtoConfig",
    "DataProtoItem",
    "all_gather_data_proto",
    "collate_fn",
    "deserialize_single_tensor",
    "deserialize_tensordict",
    "fold_batch_dim",
    "pad_dataproto_to_divisor",
    "serialize_single_tensor",
    "serialize_tensordict",
    "unfold_batch_dim",
    "union_numpy_dict",
    "union_tensor_dict",
    "union_two_dict",
    "unpad_dataproto",
]


# --------------------------------------------------------------------------------------------------------------------
# DataProtoItem
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class DataProtoItem:
    """One row of a :class:`DataProto`: a 0-batch-dim TensorDict, its non-tensor entries and the shared meta_info."""

    batch: TensorDict | None = None
    non_tensor_batch: dict = field(default_factory=dict)
    meta_info: dict = field(default_factory=dict)


def collate_fn(items: list[DataProtoItem]) -> DataProto:
    """Stack rows back into a :class:`DataProto` (used by ``make_iterator``'s DataLoader and by datasets)."""
    if not items:
        raise ValueError("collate_fn needs at least one DataProtoItem")
    batch = None
    if items[0].batch is not None:
        batch = torch.stack([item.batch for item in items]).contiguous()
    non_tensor_batch = {}
    for key in items[0].non_tensor_batch:
        column = np.empty(len(items), dtype=object)
        column[:] = [item.non_tensor_batch[key] for item in items]
        non_tensor_batch[key] = column
    return DataProto(batch=batch, non_tensor_batch=non_tensor_batch, meta_info=items[0].meta_info)


# --------------------------------------------------------------------------------------------------------------------
# DataProto
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class DataProto:
    """A batch of samples: tensors (``batch``), per-sample python objects (``non_tensor_batch``), and ``meta_info``.

    ``len(data)`` is the batch size. All row-wise operations keep ``batch`` and ``non_tensor_batch`` aligned.
    """

    batch: TensorDict | None = None
    non_tensor_batch: dict = field(default_factory=dict)
    meta_info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.check_consistency()

    # ---------------------------------------------------------------- construction

    @classmethod
    def from_single_dict(
        cls, data: dict[str, torch.Tensor | np.ndarray], meta_info: dict | None = None, auto_padding: bool = False
    ) -> DataProto:
        """Split one dict into tensors (``torch.Tensor`` values) and non-tensors (numpy arrays / lists)."""
        tensors, non_tensors = {}, {}
        for key, value in data.items():
            if isinstance(value, torch.Tensor):
                tensors[key] = value
            elif isinstance(value, (np.ndarray, list, tuple)):
                non_tensors[key] = value
            else:
                raise TypeError(
                    f"from_single_dict: key {key!r} has type {type(value).__name__}; "
                    "expected a torch.Tensor or a numpy array / list with one entry per sample"
                )
        return cls.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=meta_info, auto_padding=auto_padding)

    @classmethod
    def from_dict(
        cls,
        tensors: dict[str, torch.Tensor] | None = None,
        non_tensors: dict[str, Any] | None = None,
        meta_info: dict | None = None,
        num_batch_dims: int = 1,
        auto_padding: bool = False,
    ) -> DataProto:
        """Build from ``{name: tensor}`` (all with the same leading size) and ``{name: array or list}``."""
        tensors = dict(tensors or {})
        non_tensors = dict(non_tensors or {})
        meta_info = dict(meta_info or {})
        if num_batch_dims <= 0:
            raise ValueError(f"num_batch_dims must be positive, got {num_batch_dims}")
        if auto_padding:
            meta_info[AUTO_PADDING_KEY] = True

        batch = None
        if tensors:
            pivot_key, batch_shape = None, None
            for key, tensor in tensors.items():
                if not isinstance(tensor, torch.Tensor):
                    raise TypeError(f"from_dict: tensor key {key!r} holds a {type(tensor).__name__}, not a tensor")
                if tensor.dim() < num_batch_dims:
                    raise ValueError(f"from_dict: tensor key {key!r} has shape {tuple(tensor.shape)}, no batch dim")
                shape = tuple(tensor.shape[:num_batch_dims])
                if batch_shape is None:
                    pivot_key, batch_shape = key, shape
                elif shape != batch_shape:
                    raise ValueError(
                        f"from_dict: tensor key {key!r} has batch size {shape} but key {pivot_key!r} has {batch_shape}"
                    )
            batch = TensorDict(source=tensors, batch_size=list(batch_shape))

        non_tensor_batch = {key: to_object_array(key, value) for key, value in non_tensors.items()}
        return cls(batch=batch, non_tensor_batch=non_tensor_batch, meta_info=meta_info)

    # ---------------------------------------------------------------- invariants

    def check_consistency(self) -> None:
        """Check that the batch has one batch dim and every non-tensor array has the batch's length."""
        if self.batch is not None:
            if not isinstance(self.batch, TensorDict):
                raise TypeError(f"DataProto.batch must be a TensorDict, got {type(self.batch).__name__}")
            if len(self.batch.batch_size) != 1:
                raise ValueError(f"DataProto.batch must have exactly one batch dim, got {list(self.batch.batch_size)}")
        if not isinstance(self.non_tensor_batch, dict):
            raise TypeError(f"DataProto.non_tensor_batch must be a dict, got {type(self.non_tensor_batch).__name__}")
        if not isinstance(self.meta_info, dict):
            raise TypeError(f"DataProto.meta_info must be a dict, got {type(self.meta_info).__name__}")
        expected, source = None, None
        if self.batch is not None:
            expected, source = self.batch.batch_size[0], "the tensor batch"
        for key, value in self.non_tensor_batch.items():
            if not isinstance(value, np.ndarray):
                raise TypeError(f"non-tensor key {key!r} must be a numpy array, got {type(value).__name__}")
            if value.ndim == 0:
                raise ValueError(f"non-tensor key {key!r} is a 0-d array; it needs one entry per sample")
            if expected is None:
                expected, source = value.shape[0], f"non-tensor key {next(iter(self.non_tensor_batch))!r}"
            elif value.shape[0] != expected:
                raise ValueError(f"non-tensor key {key!r} has length {value.shape[0]} but {source} has {expected}")

    # ---------------------------------------------------------------- size and indexing

    def __len__(self) -> int:
        if self.batch is not None:
            return int(self.batch.batch_size[0])
        for value in self.non_tensor_batch.values():
            return int(value.shape[0])
        return 0

    def __getitem__(self, item: Any) -> DataProto | DataProtoItem:
        """``data[i]`` gives a :class:`DataProtoItem`; a slice, index array/tensor or bool mask gives a DataProto."""
        if isinstance(item, slice):
            return self.slice(item.start, item.stop, item.step)
        if isinstance(item, (int, np.integer)) or (isinstance(item, torch.Tensor) and item.dim() == 0):
            index = int(item)
            size = len(self)
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of range for a DataProto of length {size}")
            batch = self.batch[index] if self.batch is not None else None
            non_tensor = {key: value[index] for key, value in self.non_tensor_batch.items()}
            return DataProtoItem(batch=batch, non_tensor_batch=non_tensor, meta_info=self.meta_info)
        if isinstance(item, (list, tuple, np.ndarray, torch.Tensor)):
            return self.select_idxs(item)
        raise TypeError(f"DataProto indices must be int, slice, list, numpy array or tensor, not {type(item).__name__}")

    def slice(self, start: int | None = None, end: int | None = None, step: int | None = None) -> DataProto:
        """Rows ``start:end:step`` (tensors are views of the original)."""
        row_slice = slice(start, end, step)
        batch = self.batch[row_slice] if self.batch is not None else None
        non_tensor = {key: value[row_slice] for key, value in self.non_tensor_batch.items()}
        return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info=dict(self.meta_info))

    def select_idxs(self, idxs: Any) -> DataProto:
        """Rows at integer indices (or where a boolean mask is true), in the order given."""
        index = as_index_array(idxs)
        size = len(self)
        if index.size and (index.max() >= size or index.min() < -size):
            raise IndexError(f"index {int(index.max())} is out of range for a DataProto of length {size}")
        batch = None
        if self.batch is not None:
            batch = self.batch[torch.from_numpy(index).to(self.batch.device or "cpu")]
        non_tensor = {key: value[index] for key, value in self.non_tensor_batch.items()}
        return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info=dict(self.meta_info))

    # ---------------------------------------------------------------- keys

    def _check_keys(self, batch_keys, non_tensor_batch_keys, meta_info_keys, action: str) -> None:
        if batch_keys:
            present = set(self.batch.keys()) if self.batch is not None else set()
            for key in batch_keys:
                if key not in present:
                    raise KeyError(f"{action}: tensor key {key!r} is not in the batch (has {sorted(present)})")
        for key in non_tensor_batch_keys or []:
            if key not in self.non_tensor_batch:
                raise KeyError(
                    f"{action}: non-tensor key {key!r} is not in non_tensor_batch (has {sorted(self.non_tensor_batch)})"
                )
        for key in meta_info_keys or []:
            if key not in self.meta_info:
                raise KeyError(f"{action}: meta_info key {key!r} is not in meta_info (has {sorted(self.meta_info)})")

    def select(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
        deepcopy: bool = False,
    ) -> DataProto:
        """A DataProto with only the named keys; ``None`` keeps every key of that part."""
        self._check_keys(batch_keys, non_tensor_batch_keys, meta_info_keys, "select")
        batch = self.batch
        if batch is not None and batch_keys is not None:
            batch = batch.select(*batch_keys)
        if non_tensor_batch_keys is None:
            non_tensor = dict(self.non_tensor_batch)
        else:
            non_tensor = {key: self.non_tensor_batch[key] for key in non_tensor_batch_keys}
        if meta_info_keys is None:
            meta_info = dict(self.meta_info)
        else:
            meta_info = {key: self.meta_info[key] for key in meta_info_keys}
        if deepcopy:
            batch = batch.clone() if batch is not None else None
            non_tensor = copy.deepcopy(non_tensor)
            meta_info = copy.deepcopy(meta_info)
        return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info=meta_info)

    def pop(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
    ) -> DataProto:
        """Remove the named keys from ``self`` and return them as a new DataProto."""
        batch_keys, non_tensor_batch_keys = list(batch_keys or []), list(non_tensor_batch_keys or [])
        meta_info_keys = list(meta_info_keys or [])
        self._check_keys(batch_keys, non_tensor_batch_keys, meta_info_keys, "pop")
        tensors = {key: self.batch.pop(key) for key in batch_keys}
        non_tensors = {key: self.non_tensor_batch.pop(key) for key in non_tensor_batch_keys}
        meta_info = {key: self.meta_info.pop(key) for key in meta_info_keys}
        batch = None
        if tensors:
            batch = TensorDict(source=tensors, batch_size=self.batch.batch_size, device=self.batch.device)
        return DataProto(batch=batch, non_tensor_batch=non_tensors, meta_info=meta_info)

    def rename(self, old_keys: str | Sequence[str], new_keys: str | Sequence[str]) -> DataProto:
        """Rename tensor keys in place."""
        old_keys = [old_keys] if isinstance(old_keys, str) else list(old_keys)
        new_keys = [new_keys] if isinstance(new_keys, str) else list(new_keys)
        if len(old_keys) != len(new_keys):
            raise ValueError(f"rename: {len(old_keys)} old keys but {len(new_keys)} new keys")
        self._check_keys(old_keys, None, None, "rename")
        for old, new in zip(old_keys, new_keys):
            self.batch.rename_key_(old, new)
        return self

    def union(self, other: DataProto) -> DataProto:
        """Add ``other``'s keys to ``self`` (in place); a key in both must hold equal values, else ValueError."""
        if len(self) != len(other) and len(self) and len(other):
            raise ValueError(f"union: lengths differ: {len(self)} vs {len(other)}")
        if self.batch is None:
            self.batch = other.batch
        elif other.batch is not None:
            self.batch = union_tensor_dict(self.batch, other.batch)
        self.non_tensor_batch = union_numpy_dict(self.non_tensor_batch, other.non_tensor_batch)
        self.meta_info = union_two_dict(self.meta_info, other.meta_info)
        self.check_consistency()
        return self

    # ---------------------------------------------------------------- splitting and joining

    def is_padding_enabled(self) -> bool:
        """Auto-padding is on for this DataProto (``from_dict(auto_padding=True)``) or globally (DataProtoConfig)."""
        return bool(self.meta_info.get(AUTO_PADDING_KEY, False)) or DataProtoConfig.auto_padding

    def chunk(self, chunks: int) -> list[DataProto]:
        """Split into ``chunks`` equal parts; the length must divide (pad with ``pad_dataproto_to_divisor`` first)
        unless auto-padding is enabled, in which case parts are ``torch.chunk``-sized (the first ones longer)."""
        if not isinstance(chunks, int) or chunks <= 0:
            raise ValueError(f"chunk: the number of chunks must be a positive int, got {chunks!r}")
        size = len(self)
        if size % chunks != 0 and self.is_padding_enabled():
            per_chunk = -(-size // chunks)
            return [self.slice(start, start + per_chunk) for start in range(0, size, per_chunk)]
        if size % chunks != 0:
            raise ValueError(
                f"chunk: batch size {size} is not divisible by {chunks} chunks; "
                "pad first with pad_dataproto_to_divisor(data, chunks)"
            )
        return self.split(size // chunks) if size else [self.slice(0, 0) for _ in range(chunks)]

    def split(self, split_size: int) -> list[DataProto]:
        """Split into consecutive parts of ``split_size`` rows; the length must be a multiple of it."""
        if not isinstance(split_size, int) or split_size <= 0:
            raise ValueError(f"split: split_size must be a positive int, got {split_size!r}")
        size = len(self)
        if size % split_size != 0:
            raise ValueError(f"split: batch size {size} is not divisible by split_size {split_size}")
        return [self.slice(start, start + split_size) for start in range(0, size, split_size)]

    @staticmethod
    def concat(data: Sequence[DataProto]) -> DataProto:
        """Join DataProtos row-wise; all must have the same keys. ``meta_info`` is taken from the first."""
        data = list(data)
        if not data:
            raise ValueError("concat: needs at least one DataProto")
        check_same_keys(data)
        first = data[0]
        batch = None
        if first.batch is not None:
            batch = torch.cat([part.batch for part in data], dim=0)
        non_tensor = {
            key: np.concatenate([part.non_tensor_batch[key] for part in data], axis=0) for key in first.non_tensor_batch
        }
        return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info=dict(first.meta_info))

    def repeat(self, repeat_times: int = 2, interleave: bool = True) -> DataProto:
        """Repeat every row ``repeat_times`` times.

        ``interleave=True`` gives ``[a, a, b, b]`` (GRPO's n samples of one prompt stay adjacent);
        ``interleave=False`` tiles: ``[a, b, a, b]``.
        """
        if not isinstance(repeat_times, int) or repeat_times <= 0:
            raise ValueError(f"repeat: repeat_times must be a positive int, got {repeat_times!r}")
        rows = np.arange(len(self))
        index = np.repeat(rows, repeat_times) if interleave else np.tile(rows, repeat_times)
        return self.select_idxs(index)

    def sample_level_repeat(self, repeat_times: Sequence[int] | np.ndarray | torch.Tensor) -> DataProto:
        """Repeat row ``i`` ``repeat_times[i]`` times (interleaved)."""
        counts = np.asarray(
            repeat_times.cpu().numpy() if isinstance(repeat_times, torch.Tensor) else repeat_times, dtype=np.int64
        )
        if counts.shape != (len(self),):
            raise ValueError(f"sample_level_repeat: got {counts.shape[0]} counts for a batch of {len(self)}")
        if (counts < 0).any():
            raise ValueError("sample_level_repeat: counts must be non-negative")
        return self.select_idxs(np.repeat(np.arange(len(self)), counts))

    def reorder(self, indices: torch.Tensor | np.ndarray | Sequence[int]) -> None:
        """Permute rows in place: row ``j`` becomes old row ``indices[j]``."""
        index = as_index_array(indices)
        if index.shape[0] != len(self):
            raise ValueError(f"reorder: got {index.shape[0]} indices for a batch of {len(self)}")
        reordered = self.select_idxs(index)
        self.batch, self.non_tensor_batch = reordered.batch, reordered.non_tensor_batch

    def make_iterator(
        self, mini_batch_size: int, epochs: int, seed: int | None = None, dataloader_kwargs: dict | None = None
    ) -> Iterator[DataProto]:
        """Iterate ``epochs`` times over mini-batches of ``mini_batch_size`` rows.

        ``dataloader_kwargs`` go to :class:`torch.utils.data.DataLoader` (e.g. ``{"shuffle": True}``); ``seed``
        seeds its generator so the order is reproducible. Every mini-batch carries this batch's ``meta_info``.
        """
        loader = mini_batch_rows(len(self), mini_batch_size, seed, dataloader_kwargs)

        def mini_batches() -> Iterator[DataProto]:
            for _ in range(epochs):
                for rows in loader:
                    mini_batch = self.select_idxs(rows)
                    mini_batch.meta_info = self.meta_info
                    yield mini_batch

        return iter(mini_batches())

    # ---------------------------------------------------------------- device, disk, pickling

    def to(self, device: str | torch.device) -> DataProto:
        """Move the tensors to ``device`` (in place; returns self)."""
        if self.batch is not None:
            self.batch = self.batch.to(device)
        return self

    def save_to_disk(self, filepath: str) -> None:
        """Write the whole DataProto to ``filepath`` (pickle with the compact tensor encoding)."""
        with open(filepath, "wb") as file:
            pickle.dump(self, file, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def load_from_disk(filepath: str) -> DataProto:
        """Read a DataProto written by :meth:`save_to_disk`."""
        with open(filepath, "rb") as file:
            data = pickle.load(file)
        if not isinstance(data, DataProto):
            raise TypeError(f"{filepath} does not hold a DataProto (found {type(data).__name__})")
        return data

    def __getstate__(self) -> dict:
        # the state's layout is read back by every release (see verl.protocol_tools.pickling)
        state = {"batch": encode_batch(self.batch), "non_tensor_batch": self.non_tensor_batch}
        state["meta_info"] = self.meta_info
        return state

    def __setstate__(self, state: dict) -> None:
        self.batch = decode_batch(state["batch"])
        self.non_tensor_batch = state["non_tensor_batch"]
        self.meta_info = state["meta_info"]

    # ---------------------------------------------------------------- display

    def print_size(self, prefix: str = "") -> None:
        """Print the memory held by the tensors and the non-tensor arrays, in GB."""
        tensor_bytes = 0
        if self.batch is not None:
            tensor_bytes = sum(t.element_size() * t.numel() for t in self.batch.values(True, True))
        numpy_bytes = sum(value.nbytes for value in self.non_tensor_batch.values())
        print(f"{prefix}tensors: {tensor_bytes / 1024**3:.4f} GB, non-tensors: {numpy_bytes / 1024**3:.4f} GB")

    def __repr__(self) -> str:
        tensor_part = {key: tuple(value.shape) for key, value in self.batch.items()} if self.batch is not None else {}
        non_tensor_part = {key: value.shape for key, value in self.non_tensor_batch.items()}
        return (
            f"DataProto(len={len(self)}, batch={tensor_part}, non_tensor_batch={non_tensor_part}, "
            f"meta_info_keys={sorted(self.meta_info)})"
        )


def __getattr__(name: str):
    # ``verl.protocol.DataProtoFuture`` is where verl users import it from; it lives with the single controller,
    # which imports this module, so it is resolved lazily to avoid an import cycle.
    if name == "DataProtoFuture":
        from verl.single_controller.base.future import DataProtoFuture

        return DataProtoFuture
    raise AttributeError(f"module 'verl.protocol' has no attribute {name!r}")
