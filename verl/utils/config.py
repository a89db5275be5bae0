"""Turning OmegaConf configs into the typed dataclasses (verl's ``verl.utils.config``)."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

T = TypeVar("T")


def _import_target(target: str) -> type:
    module_name, _, class_name = target.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


def as_typed_config(config: Any, dataclass_type: type[T], key: str = "") -> T:
    """``config`` as a ``dataclass_type``: an instance passes through, a DictConfig/dict of its keys is checked
    (unknown keys, types and allowed values, each error naming the key under the config path ``key``) and missing
    keys take the dataclass defaults, so the dataclass stays the one place a default is written."""
    if isinstance(config, dataclass_type):
        return config
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    from verl.trainer.config.validation import check_typed

    return check_typed(config if config is not None else {}, dataclass_type, prefix=key)


def omega_conf_to_dataclass(config: DictConfig | dict | Any, dataclass_type: type[T] | None = None) -> T:
    """Build a typed dataclass from a ``DictConfig`` (or dict) with the same keys.

    Missing keys take the dataclass defaults; unknown keys and values of the wrong type raise an error
    naming the key. Interpolations are resolved against the config's own root. With ``dataclass_type``
    omitted, the class is taken from an already-typed config or from its ``_target_`` key. A dataclass
    instance passes through unchanged.
    """
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return config  # type: ignore[return-value]
    if isinstance(config, dict):
        config = OmegaConf.create(config)
    if not isinstance(config, DictConfig):
        raise TypeError(f"omega_conf_to_dataclass expects a DictConfig, dict or dataclass, got {type(config).__name__}")
    if dataclass_type is None:
        typed = OmegaConf.get_type(config)
        if typed is not None and dataclasses.is_dataclass(typed):
            dataclass_type = typed
        elif "_target_" in config:
            dataclass_type = _import_target(config._target_)
        else:
            raise ValueError("omega_conf_to_dataclass needs dataclass_type when the config has no _target_ key")
    container = OmegaConf.to_container(config, resolve=True)
    container.pop("_target_", None)
    merged = OmegaConf.merge(OmegaConf.structured(dataclass_type), container)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]
