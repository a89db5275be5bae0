"""A ``DataLoader`` whose position (epoch, batches consumed) is saved in checkpoints and restored on resume.

``state_dict()`` counts batches handed to the caller, not batches prefetched by workers, so restoring it
and iterating again yields exactly the batches the interrupted run had not yet consumed. It needs a
:class:`~verl.utils.dataset.sampler.StatefulSampler` (torchdata is not required).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig
from torch.utils.data import DataLoader

from verl.trainer.config.data import DataConfig
from verl.utils.config import as_typed_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.utils.dataset.sampler import StatefulSampler, create_rl_sampler


class StatefulDataLoader(DataLoader):
    """``DataLoader`` with ``state_dict()`` / ``load_state_dict()`` for exact mid-epoch resumption."""

    def __init__(self, dataset, batch_size: int, sampler: StatefulSampler, **kwargs: Any):
        if not isinstance(sampler, StatefulSampler):
            raise TypeError("StatefulDataLoader needs a StatefulSampler (see verl.utils.dataset.create_rl_sampler)")
        super().__init__(dataset, batch_size=batch_size, sampler=sampler, **kwargs)
        self.epoch = 0
        self.batches_consumed = 0

    def __iter__(self) -> Iterator[Any]:
        self.sampler.set_epoch(self.epoch, start_index=self.batches_consumed * self.batch_size)
        for batch in super().__iter__():
            self.batches_consumed += 1
            yield batch
        self.epoch += 1
        self.batches_consumed = 0

    def iter_epochs(self, total_epochs: int) -> Iterator[Any]:
        """Batches from the saved position until ``total_epochs`` epochs are done."""
        while self.epoch < total_epochs:
            yield from self

    def state_dict(self) -> dict[str, int]:
        """``{epoch, batches_consumed, num_samples, batch_size, seed}``: where the next batch comes from."""
        return {
            "epoch": self.epoch,
            "batches_consumed": self.batches_consumed,
            "num_samples": self.sampler.num_samples,
            "batch_size": self.batch_size,
            "seed": self.sampler.seed,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from ``state``; the dataset size, batch size and seed must be the ones it was saved with."""
        for key, current in (
            ("num_samples", self.sampler.num_samples),
            ("batch_size", self.batch_size),
            ("seed", self.sampler.seed),
        ):
            if key in state and state[key] != current:
                raise ValueError(
                    f"dataloader checkpoint has {key}={state[key]} but this run has {current}; resume with the "
                    "same data files, data.train_batch_size and data.seed, or start without the dataloader state"
                )
        self.epoch = int(state["epoch"])
        self.batches_consumed = int(state["batches_consumed"])


def create_rl_dataset(
    data_paths: str | list[str],
    data_config: DataConfig | DictConfig | dict,
    tokenizer,
    processor=None,
    is_train: bool = True,
    max_samples: int = -1,
) -> RLHFDataset:
    """``RLHFDataset`` or the class named by ``data.custom_cls.{path,name}`` (which must subclass torch Dataset)."""
    data_config = as_typed_config(data_config, DataConfig, "data")
    dataset_cls = RLHFDataset
    if data_config.custom_cls.path:
        dataset_cls = _load_dataset_class(data_config.custom_cls.path, data_config.custom_cls.name)
    return dataset_cls(
        data_files=data_paths, tokenizer=tokenizer, config=data_config, processor=processor, max_samples=max_samples
    )


def _load_dataset_class(path: str, name: str) -> type:
    import importlib.util

    from torch.utils.data import Dataset

    spec = importlib.util.spec_from_file_location("custom_dataset_module", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"data.custom_cls.path={path!r} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dataset_cls = getattr(module, name, None)
    if not (isinstance(dataset_cls, type) and issubclass(dataset_cls, Dataset)):
        raise TypeError(f"data.custom_cls.name={name!r} in {path!r} is not a torch.utils.data.Dataset subclass")
    return dataset_cls


def create_rl_dataloader(
    dataset,
    data_config: DataConfig | DictConfig | dict,
    batch_size: int,
    is_train: bool = True,
    sampler: StatefulSampler | None = None,
    collate_fn=collate_fn,
) -> StatefulDataLoader:
    """Training: shuffled by ``data.seed``, incomplete last batch dropped; validation: in order (shuffled with
    ``data.validation_shuffle``), all kept. A given ``sampler`` (a :class:`StatefulSampler`, so the position can be
    saved) and ``collate_fn`` replace the defaults."""
    data_config = as_typed_config(data_config, DataConfig, "data")
    if sampler is None and is_train:
        sampler = create_rl_sampler(data_config, dataset)
    elif sampler is None:
        sampler = StatefulSampler(len(dataset), shuffle=data_config.validation_shuffle, seed=data_config.seed)
    return StatefulDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=data_config.dataloader_num_workers,
        collate_fn=collate_fn,
        drop_last=is_train,
    )
