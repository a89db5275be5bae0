"""Prompt datasets, the built-in arithmetic task and a resumable dataloader."""

from verl.utils.dataset.builtin import BUILTIN_PREFIX, register_builtin_task, resolve_data_files
from verl.utils.dataset.dataloader import StatefulDataLoader, create_rl_dataloader, create_rl_dataset
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.utils.dataset.sampler import StatefulSampler, create_rl_sampler

__all__ = [
    "BUILTIN_PREFIX",
    "RLHFDataset",
    "StatefulDataLoader",
    "StatefulSampler",
    "collate_fn",
    "create_rl_dataloader",
    "create_rl_dataset",
    "create_rl_sampler",
    "register_builtin_task",
    "resolve_data_files",
]
