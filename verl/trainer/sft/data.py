"""SFT datasets and the per-rank batch streams.

Every rank draws the same seeded global batch of ``data.train_batch_size`` example indices
(:class:`~verl.trainer.ppo.data_loading.EpochBatchSampler`) and keeps its contiguous slice, so the saved
stream position ``(epoch, batches consumed)`` restores every rank exactly.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader, Dataset, Sampler

from verl.trainer.ppo.data_loading import EpochBatchSampler, ResumableBatchStream


def _load_custom_class(path: str, name: str) -> type:
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data.custom_cls.path={path!r} is not a file")
    spec = importlib.util.spec_from_file_location(f"custom_sft_dataset_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, name or ""):
        raise AttributeError(f"data.custom_cls.name={name!r} is not defined in {path!r}")
    cls = getattr(module, name)
    if not issubclass(cls, Dataset):
        raise TypeError(f"data.custom_cls {name!r} in {path!r} must subclass torch.utils.data.Dataset")
    return cls


def dataset_class(data_config: Any) -> type:
    """``data.custom_cls`` when set, else ``MultiTurnSFTDataset`` (``data.multiturn.enable``) or ``SFTDataset``."""
    custom = data_config.custom_cls
    if custom is not None and custom.path:
        return _load_custom_class(custom.path, custom.name)
    if data_config.multiturn.enable:
        from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

        return MultiTurnSFTDataset
    from verl.utils.dataset.sft_dataset import SFTDataset

    return SFTDataset


def create_sft_dataset(data_files: Any, data_config: Any, tokenizer) -> Dataset:
    """The dataset over ``data_files``, constructed as ``cls(parquet_files, tokenizer, config)``."""
    return dataset_class(data_config)(data_files, tokenizer, data_config)


class RankSliceBatchSampler(Sampler[list[int]]):
    """This rank's contiguous ``1 / world_size`` slice of each global batch of ``global_sampler``."""

    def __init__(self, global_sampler: EpochBatchSampler, rank: int, world_size: int):
        if global_sampler.batch_size % world_size:
            raise ValueError(
                f"data.train_batch_size={global_sampler.batch_size} must be divisible by the world size {world_size}"
            )
        self.global_sampler = global_sampler
        self.per_rank = global_sampler.batch_size // world_size
        self.rank = rank

    def __len__(self) -> int:
        return len(self.global_sampler)

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_sampler:
            yield batch[self.rank * self.per_rank : (self.rank + 1) * self.per_rank]


def create_train_stream(
    dataset: Dataset, train_batch_size: int, shuffle: bool, seed: int, total_epochs: int, rank: int, world_size: int
) -> ResumableBatchStream:
    """Resumable stream of this rank's share (``train_batch_size / world_size`` examples) of each global batch."""
    if len(dataset) < train_batch_size:
        raise ValueError(
            f"the training set has {len(dataset)} examples, fewer than one batch "
            f"(data.train_batch_size={train_batch_size}); lower the batch size or add data"
        )
    global_sampler = EpochBatchSampler(len(dataset), train_batch_size, shuffle=shuffle, seed=seed)
    loader = DataLoader(dataset, batch_sampler=RankSliceBatchSampler(global_sampler, rank, world_size))
    return ResumableBatchStream(loader, global_sampler, total_epochs=total_epochs)


def create_val_loader(dataset: Dataset | None, micro_batch_size: int, rank: int, world_size: int) -> DataLoader | None:
    """This rank's equal share of the validation set (the remainder of ``len / world_size`` is dropped, so every
    rank runs the same number of forward passes), in batches of ``micro_batch_size``."""
    if dataset is None:
        return None
    per_rank = len(dataset) // world_size
    if per_rank == 0:
        return None
    indices = list(range(rank * per_rank, (rank + 1) * per_rank))
    return DataLoader(dataset, batch_size=micro_batch_size, sampler=indices, shuffle=False)
