"""Registers the typed PPO config with Hydra's ConfigStore as ``ppo_trainer_schema``.

``ppo_trainer.yaml`` lists ``ppo_trainer_schema`` first in its defaults, so every default comes from the
dataclasses and the YAML files only select groups and preset values. The node is stored as a plain
(untyped) mapping: Hydra composes it and applies overrides, and
:func:`verl.trainer.config.validation.validate_config` then checks keys, types and ranges against the
dataclasses with messages that name the key, the allowed values and the nearest valid key.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

SCHEMA_NAME = "ppo_trainer_schema"
"""Name of the root schema node in Hydra's ConfigStore."""


def register_schemas() -> None:
    """Store the defaults of :class:`~verl.trainer.config.root.PPOConfig` as ``ppo_trainer_schema``."""
    from verl.trainer.config.root import PPOConfig

    node = OmegaConf.to_container(OmegaConf.structured(PPOConfig))
    ConfigStore.instance().store(name=SCHEMA_NAME, node=node, provider="verl")
