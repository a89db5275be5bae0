"""The one resumable sampler: its order is a pure function of ``(seed, epoch)`` and it can start mid-epoch.

Epoch ``e`` visits ``torch.randperm(n, generator=Generator().manual_seed(seed + e))`` (or ``0..n-1``
without shuffling), so a resumed run replays exactly the order the interrupted run would have seen. The RL
trainer reads it whole; the SFT trainer gives each rank its contiguous slice of every global batch
(``rank``/``world_size``/``global_batch_size``), so the saved position ``(epoch, batches consumed)`` restores every
rank exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from omegaconf import DictConfig
from torch.utils.data import Sampler

from verl.trainer.config.data import DataConfig
from verl.utils.config import as_typed_config


class StatefulSampler(Sampler[int]):
    """Indices of one epoch, from position ``start_index`` on; the dataloader sets epoch and start.

    With ``world_size > 1`` the epoch order is cut into complete global batches of ``global_batch_size``
    (a ragged tail is dropped) and this sampler yields rank ``rank``'s contiguous
    ``global_batch_size / world_size`` indices of each; ``start_index`` then counts this rank's indices.
    """

    def __init__(
        self,
        num_samples: int,
        shuffle: bool = True,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
        global_batch_size: int | None = None,
    ):
        if num_samples <= 0:
            raise ValueError("the dataset is empty: nothing to sample")
        if world_size > 1 and (global_batch_size is None or global_batch_size % world_size):
            raise ValueError(
                f"data.train_batch_size={global_batch_size} must be divisible by the world size {world_size}"
            )
        self.num_samples = num_samples
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.global_batch_size = global_batch_size
        self.epoch = 0
        self.start_index = 0

    def order(self, epoch: int) -> list[int]:
        """The full visiting order of ``epoch`` (over all ranks)."""
        if not self.shuffle:
            return list(range(self.num_samples))
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def rank_order(self, epoch: int) -> list[int]:
        """This rank's indices of ``epoch``: its slice of each complete global batch (everything on one rank)."""
        order = self.order(epoch)
        if self.world_size == 1:
            return order
        per_rank = self.global_batch_size // self.world_size
        batches = len(order) // self.global_batch_size
        start = self.rank * per_rank
        indices = []
        for batch in range(batches):
            first = batch * self.global_batch_size + start
            indices.extend(order[first : first + per_rank])
        return indices

    def set_epoch(self, epoch: int, start_index: int = 0) -> None:
        """The next iteration covers ``rank_order(epoch)[start_index:]``."""
        self.epoch, self.start_index = epoch, start_index

    def __iter__(self) -> Iterator[int]:
        yield from self.rank_order(self.epoch)[self.start_index :]

    def __len__(self) -> int:
        if self.world_size == 1:
            return self.num_samples
        return (self.num_samples // self.global_batch_size) * (self.global_batch_size // self.world_size)


def create_rl_sampler(data_config: DataConfig | DictConfig | dict, dataset) -> StatefulSampler:
    """The training sampler: shuffled with ``data.seed`` when ``data.shuffle`` (a DictConfig of ``data`` keys is
    read as a :class:`DataConfig`)."""
    data_config = as_typed_config(data_config, DataConfig, "data")
    return StatefulSampler(len(dataset), shuffle=data_config.shuffle, seed=data_config.seed)
