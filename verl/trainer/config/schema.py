"""Registers the typed PPO config with Hydra's ConfigStore as ``ppo_trainer_schema``.

``ppo_trainer.yaml`` lists ``ppo_trainer_schema`` first in its defaults, so every default comes from the
dataclasses and the YAML files only select groups and preset values. The node is stored as a plain
(untyped) mapping: Hydra composes it and applies overrides, and
:func:`verl.trainer.config.validation.validate_config` then checks keys, types and ranges against the
dataclasses with messages that name the key, the allowed values and the nearest valid key. Each node is built
when Hydra first reads it (:mod:`verl.trainer.config.lazy_store`): processes that import verl without composing a
config (the Ray workers) do not pay for it.
"""

from __future__ import annotations

import functools

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from verl.trainer.config.lazy_store import store_lazily

SCHEMA_NAME = "ppo_trainer_schema"
"""Name of the root schema node in Hydra's ConfigStore."""


def register_schemas() -> None:
    """Store the defaults of :class:`~verl.trainer.config.root.PPOConfig` as ``ppo_trainer_schema`` (once)."""
    from verl.trainer.config.root import PPOConfig

    if ConfigStore.instance().repo.get(f"{SCHEMA_NAME}.yaml") is not None:
        return
    store_lazily(SCHEMA_NAME, lambda: _container(PPOConfig), provider="verl")
    _register_offline_schemas()


def _container(cls: type) -> dict:
    """The defaults of dataclass ``cls`` as a plain (untyped) mapping."""
    return OmegaConf.to_container(OmegaConf.structured(cls))


def _register_offline_schemas() -> None:
    """``sft_trainer_schema``, ``generation_schema`` and ``evaluation_schema``: roots of ``sft_trainer.yaml``,
    ``generation.yaml`` and ``evaluation.yaml``."""
    from verl.trainer.config.generation import EvaluationConfig, GenerationConfig
    from verl.trainer.config.sft import SFTConfig

    for name, cls in (
        ("sft_trainer_schema", SFTConfig),
        ("generation_schema", GenerationConfig),
        ("evaluation_schema", EvaluationConfig),
    ):
        store_lazily(name, functools.partial(_container, cls), provider="verl")


ROOT_SCHEMA_CLASSES = {
    SCHEMA_NAME: "verl.trainer.config.root:PPOConfig",
    "sft_trainer_schema": "verl.trainer.config.sft:SFTConfig",
    "generation_schema": "verl.trainer.config.generation:GenerationConfig",
    "evaluation_schema": "verl.trainer.config.generation:EvaluationConfig",
}
"""Schema node name -> ``module:Class`` of the dataclass it was built from (for validating root YAMLs)."""


def register_schema(name: str, spec: str) -> None:
    """Store a recipe's root config (``spec`` is ``"module:Class"``, e.g. a class made by
    :func:`verl.trainer.config.extend.extend_config`) under ``name`` in Hydra's ConfigStore, and remember the class
    for :func:`schema_class`. The node holds only what differs from :class:`PPOConfig`'s defaults (the recipe's new
    keys and the defaults it changes): a recipe YAML lists ``ppo_trainer`` then ``name`` in its defaults, so every
    preset of ``ppo_trainer.yaml`` applies first, the recipe's own keys then exist (and can be overridden on the
    command line), and its defaults win. Idempotent."""
    from verl.trainer.config.root import PPOConfig

    ROOT_SCHEMA_CLASSES[name] = spec
    if ConfigStore.instance().repo.get(f"{name}.yaml") is not None:
        return
    recipe = schema_class(name)
    store_lazily(name, lambda: _differences(_container(recipe), _container(PPOConfig)), provider="verl")


def _differences(node: dict, base: dict) -> dict:
    """The entries of ``node`` that ``base`` lacks or holds with another value (recursing into mappings)."""
    out = {}
    for key, value in node.items():
        if key not in base:
            out[key] = value
        elif isinstance(value, dict) and isinstance(base[key], dict):
            inner = _differences(value, base[key])
            if inner:
                out[key] = inner
        elif value != base[key]:
            out[key] = value
    return out


def schema_class(name: str) -> type:
    """The dataclass behind the ConfigStore schema ``name`` (e.g. ``ppo_trainer_schema`` -> ``PPOConfig``)."""
    import importlib

    if name not in ROOT_SCHEMA_CLASSES:
        raise KeyError(f"unknown schema {name!r}; known: {sorted(ROOT_SCHEMA_CLASSES)}")
    module, _, cls = ROOT_SCHEMA_CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), cls)
