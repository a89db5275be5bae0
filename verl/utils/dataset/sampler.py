"""A sampler whose order is a pure function of ``(seed, epoch)`` and that can start mid-epoch.

Epoch ``e`` visits ``torch.randperm(n, generator=Generator().manual_seed(seed + e))`` (or ``0..n-1``
without shuffling), so a resumed run replays exactly the order the interrupted run would have seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Sampler


class StatefulSampler(Sampler[int]):
    """Indices of one epoch, from position ``start_index`` on; the dataloader sets epoch and start."""

    def __init__(self, num_samples: int, shuffle: bool = True, seed: int = 1):
        if num_samples <= 0:
            raise ValueError("the dataset is empty: nothing to sample")
        self.num_samples = num_samples
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.start_index = 0

    def order(self, epoch: int) -> list[int]:
        """The full visiting order of ``epoch``."""
        if not self.shuffle:
            return list(range(self.num_samples))
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def set_epoch(self, epoch: int, start_index: int = 0) -> None:
        """The next iteration covers ``order(epoch)[start_index:]``."""
        self.epoch, self.start_index = epoch, start_index

    def __iter__(self) -> Iterator[int]:
        yield from self.order(self.epoch)[self.start_index :]

    def __len__(self) -> int:
        return self.num_samples


def create_rl_sampler(data_config: Any, dataset) -> StatefulSampler:
    """The training sampler: shuffled with ``data.seed`` when ``data.shuffle`` (verl's defaults: true, 1)."""
    from verl.utils.dataset.rl_dataset import DatasetOptions

    options = DatasetOptions.from_config(data_config)
    return StatefulSampler(len(dataset), shuffle=bool(options.shuffle), seed=int(options.seed))
