"""Composing the config of any training entry point (``verl.trainer.main_ppo`` or a recipe's main module) from
command-line overrides, as the entry point itself would, without starting anything.

A recipe main module names its root YAML and typed tree as ``CONFIG_FILE`` and ``SCHEMA``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

MAIN_PPO = "verl.trainer.main_ppo"

__all__ = ["MAIN_PPO", "compose_entry"]


def compose_entry(entry: str, overrides: Sequence[str]) -> Any:
    """The validated, typed config that ``python -m <entry> <overrides>`` would train with.

    Raises :class:`~verl.trainer.config.loader.ConfigError` naming every problem (unknown keys with the nearest
    valid one, bad values, cross-field and recipe checks)."""
    from verl.trainer.config.loader import check_overrides, compose_config, compose_config_file
    from verl.trainer.main_ppo import prepare_config

    if entry == MAIN_PPO:  # compose_config checks the keys itself
        return prepare_config(compose_config(list(overrides)))
    module = importlib.import_module(entry)
    config_file, schema = getattr(module, "CONFIG_FILE", None), getattr(module, "SCHEMA", None)
    if config_file is None or schema is None:
        raise ValueError(f"{entry} is not a training entry point: it defines no CONFIG_FILE / SCHEMA")
    check_overrides(list(overrides), schema)
    return prepare_config(compose_config_file(config_file, list(overrides)), schema)
