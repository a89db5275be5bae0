"""SFT datasets and the per-rank batch streams.

Every rank draws the same seeded global batch of ``data.train_batch_size`` example indices and keeps its contiguous
slice (:class:`~verl.utils.dataset.sampler.StatefulSampler` with ``rank``/``world_size``), so the saved position
``(epoch, batches consumed)`` of the :class:`~verl.utils.dataset.dataloader.StatefulDataLoader` restores every rank
exactly.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from torch.utils.data import DataLoader, Dataset

from verl.utils.dataset.dataloader import StatefulDataLoader
from verl.utils.dataset.sampler import StatefulSampler


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


def create_train_stream(
    dataset: Dataset, train_batch_size: int, shuffle: bool, seed: int, rank: int, world_size: int
) -> StatefulDataLoader:
    """Resumable loader of this rank's share (``train_batch_size / world_size`` examples) of each global batch;
    iterate ``loader.iter_epochs(total_epochs)``."""
    if len(dataset) < train_batch_size:
        raise ValueError(
            f"the training set has {len(dataset)} examples, fewer than one batch "
            f"(data.train_batch_size={train_batch_size}); lower the batch size or add data"
        )
    sampler = StatefulSampler(
        len(dataset), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size, global_batch_size=train_batch_size
    )
    return StatefulDataLoader(dataset, batch_size=train_batch_size // world_size, sampler=sampler, drop_last=True)


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
