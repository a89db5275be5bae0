"""Recipes extend the typed config: new groups and leaves, re-declared groups, their own checks."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass

import pytest

from verl.trainer.config.data import DataConfig
from verl.trainer.config.extend import extend_config, recipe_errors
from verl.trainer.config.loader import check_overrides
from verl.trainer.config.root import PPOConfig
from verl.trainer.config.validation import ConfigError, check_typed, validate_config
from verl.workers.config.base import BaseConfig, bounded_field, choice_field


@dataclass
class ExtraDataConfig(DataConfig):
    """Data with one more key."""

    oversample: float = bounded_field(2.0, ge=1.0)
    """Extra key."""


@dataclass
class PoolConfig(BaseConfig):
    """A new top-level group."""

    n_gpus_per_node: int = bounded_field(1, gt=0)
    """Devices."""


def _checks(config):
    return ["oversample too small for this recipe"] if config.data.oversample < 1.5 else []


Extended = extend_config(
    PPOConfig,
    "Extended",
    {
        "data": ExtraDataConfig,
        "pool": PoolConfig,
        "actor_rollout_ref.hybrid_engine": (bool, choice_field(False, (False,))),
    },
    checks=_checks,
)


def test_extended_tree_has_the_new_keys_with_their_defaults():
    config = Extended()
    assert isinstance(config, PPOConfig)
    assert config.data.oversample == 2.0 and config.data.train_batch_size == DataConfig().train_batch_size
    assert config.pool.n_gpus_per_node == 1
    assert config.actor_rollout_ref.hybrid_engine is False
    assert config.actor_rollout_ref.actor == PPOConfig().actor_rollout_ref.actor


def test_validation_accepts_recipe_keys_and_rejects_typos_with_the_nearest_key():
    typed = check_typed({"data": {"oversample": 3.0}, "pool": {"n_gpus_per_node": 2}}, Extended)
    assert typed.data.oversample == 3.0 and typed.pool.n_gpus_per_node == 2
    with pytest.raises(ConfigError, match="did you mean 'data.oversample'"):
        check_typed({"data": {"oversampel": 3.0}}, Extended)
    with pytest.raises(ConfigError, match="allowed values: false"):
        check_typed({"actor_rollout_ref": {"hybrid_engine": True}}, Extended)
    check_overrides(["data.oversample=3", "pool.n_gpus_per_node=2"], Extended)
    with pytest.raises(ConfigError, match="unknown key 'pool.n_gpus'"):
        check_overrides(["pool.n_gpus=2"], Extended)


def test_recipe_checks_run_with_the_shared_ones():
    low = check_typed({"data": {"oversample": 1.2}}, Extended)
    assert recipe_errors(low) == ["oversample too small for this recipe"]
    with pytest.raises(ConfigError, match="oversample too small"):
        validate_config(low, schema=Extended)
    assert recipe_errors(PPOConfig()) == []


def test_extended_config_pickles_and_copies():
    config = Extended()
    assert pickle.loads(pickle.dumps(config)) == config
    assert dataclasses.replace(config, pool=PoolConfig(n_gpus_per_node=4)).pool.n_gpus_per_node == 4


def test_group_replacement_must_subclass_the_original():
    with pytest.raises(TypeError, match="must subclass DataConfig"):
        extend_config(PPOConfig, "Bad", {"data": PoolConfig})
    with pytest.raises(KeyError, match="no config group 'nothing'"):
        extend_config(PPOConfig, "Bad", {"nothing.key": PoolConfig})
