"""Prompt datasets, the built-in arithmetic task and a resumable dataloader.

The names are imported on first use (the datasets pull in torch and transformers), so that the checks that run before
Ray starts (``verl.utils.dataset.preflight``) stay fast.
"""

_NAMES = {
    "BUILTIN_PREFIX": "verl.utils.dataset.builtin",
    "register_builtin_task": "verl.utils.dataset.builtin",
    "resolve_data_files": "verl.utils.dataset.builtin",
    "StatefulDataLoader": "verl.utils.dataset.dataloader",
    "create_rl_dataloader": "verl.utils.dataset.dataloader",
    "create_rl_dataset": "verl.utils.dataset.dataloader",
    "RLHFDataset": "verl.utils.dataset.rl_dataset",
    "collate_fn": "verl.utils.dataset.rl_dataset",
    "StatefulSampler": "verl.utils.dataset.sampler",
    "create_rl_sampler": "verl.utils.dataset.sampler",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name in _NAMES:
        import importlib

        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
