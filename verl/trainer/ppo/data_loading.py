"""Train / validation dataloaders whose position can be saved and restored exactly.

The training order of epoch ``e`` is a permutation drawn from ``torch.Generator().manual_seed(seed + e)``, so it
depends only on the seed and the epoch; the saved position is ``(epoch, batches consumed in the epoch)`` and
a resumed run continues with the very next batch the uninterrupted run would have drawn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

__all__ = ["EpochBatchSampler", "ResumableBatchStream", "create_rl_dataset", "create_dataloaders"]


class EpochBatchSampler(Sampler[list[int]]):
    """Index batches of one epoch: a seeded permutation (or the identity) cut into ``batch_size`` pieces.

    ``epoch`` and ``start_batch`` are set by :class:`ResumableBatchStream` before each iteration;
    the incomplete last batch is dropped when ``drop_last``.
    """

    def __init__(self, num_samples: int, batch_size: int, shuffle: bool, seed: int, drop_last: bool = True):
        if batch_size <= 0:
            raise ValueError(f"batch size must be positive, got {batch_size}")
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.start_batch = 0

    def __len__(self) -> int:
        if self.drop_last:
            return self.num_samples // self.batch_size
        return -(-self.num_samples // self.batch_size)

    def epoch_order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_samples))
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        order = self.epoch_order(self.epoch)
        for batch_index in range(self.start_batch, len(self)):
            yield order[batch_index * self.batch_size : (batch_index + 1) * self.batch_size]


class ResumableBatchStream:
    """Batches over ``total_epochs`` epochs with a saveable position ``{"epoch", "batches_consumed"}``.

    A batch counts as consumed when it is handed to the trainer, so a checkpoint taken after a step
    resumes with the next unseen batch even when the dataloader prefetches.
    """

    def __init__(self, dataloader: DataLoader, sampler: EpochBatchSampler, total_epochs: int):
        self.dataloader = dataloader
        self.sampler = sampler
        self.total_epochs = total_epochs
        self.epoch = 0
        self.batches_consumed = 0

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while self.epoch < self.total_epochs:
            self.sampler.epoch, self.sampler.start_batch = self.epoch, self.batches_consumed
            for batch in self.dataloader:
                self.batches_consumed += 1
                yield batch
            self.epoch += 1
            self.batches_consumed = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "batches_consumed": self.batches_consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = int(state["epoch"])
        self.batches_consumed = int(state["batches_consumed"])
        if self.batches_consumed >= len(self.sampler):
            self.epoch, self.batches_consumed = self.epoch + 1, 0


def create_rl_dataset(data_files, data_config, tokenizer, processor=None, is_train: bool = True) -> Dataset:
    """The prompt dataset (``verl.utils.dataset.rl_dataset.RLHFDataset``) over ``data_files``.

    ``builtin://...`` sentinels are resolved to generated files by the dataset; at most
    ``data.train_max_samples`` / ``data.val_max_samples`` rows are used (-1: all).
    """
    from verl.utils.dataset.rl_dataset import RLHFDataset

    max_samples = getattr(data_config, "train_max_samples" if is_train else "val_max_samples", -1)
    return RLHFDataset(
        data_files=data_files,
        tokenizer=tokenizer,
        config=data_config,
        processor=processor,
        max_samples=-1 if max_samples is None else int(max_samples),
    )


def create_dataloaders(
    train_dataset: Dataset,
    val_dataset: Dataset | None,
    data_config,
    total_epochs: int,
) -> tuple[ResumableBatchStream, DataLoader | None]:
    """The training stream (``data.train_batch_size`` or ``data.gen_batch_size`` prompts per batch, seeded
    shuffle) and the validation loader (whole set in one batch unless ``data.val_batch_size`` is set)."""
    from verl.utils.dataset.rl_dataset import collate_fn

    batch_size = getattr(data_config, "gen_batch_size", None) or data_config.train_batch_size
    if len(train_dataset) < batch_size:
        raise ValueError(
            f"The training set has {len(train_dataset)} prompts, fewer than one batch "
            f"(data.train_batch_size={batch_size}); lower the batch size or add data."
        )
    seed = getattr(data_config, "seed", None)
    sampler = EpochBatchSampler(
        num_samples=len(train_dataset),
        batch_size=batch_size,
        shuffle=bool(getattr(data_config, "shuffle", True)),
        seed=1 if seed is None else int(seed),
    )
    num_workers = int(getattr(data_config, "dataloader_num_workers", 0) or 0)
    train_loader = DataLoader(train_dataset, batch_sampler=sampler, num_workers=num_workers, collate_fn=collate_fn)
    stream = ResumableBatchStream(train_loader, sampler, total_epochs=total_epochs)

    val_loader = None
    if val_dataset is not None and len(val_dataset) > 0:
        val_batch_size = getattr(data_config, "val_batch_size", None) or len(val_dataset)
        val_loader = DataLoader(
            val_dataset, batch_size=val_batch_size, shuffle=False, drop_last=False, collate_fn=collate_fn
        )
    return stream, val_loader
