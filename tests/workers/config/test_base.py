"""Typed configs read like dicts, and ``omega_conf_to_dataclass`` builds them from DictConfigs."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import ActorConfig, OptimConfig, RolloutConfig, SamplingConfig


def test_dict_style_reads():
    optim = OptimConfig(lr=3e-4)
    assert optim.get("lr") == 3e-4 and optim["lr"] == 3e-4
    assert optim.get("no_such_key", 7) == 7
    assert "weight_decay" in optim and "no_such_key" not in optim
    with pytest.raises(KeyError):
        optim["no_such_key"]
    assert list(optim)[:2] == ["optimizer", "optimizer_impl"]


def test_dictconfig_with_partial_keys_and_interpolation():
    root = OmegaConf.create(
        {
            "data": {"max_response_length": 77},
            "rollout": {"name": "hf", "response_length": "${data.max_response_length}"},
        }
    )
    rollout = omega_conf_to_dataclass(root.rollout, RolloutConfig)
    assert isinstance(rollout, RolloutConfig) and isinstance(rollout.val_kwargs, SamplingConfig)
    assert rollout.name == "hf" and rollout.response_length == 77
    assert rollout.val_kwargs.temperature == 0.0 and rollout.val_kwargs.do_sample is False  # val defaults kept


def test_target_key_selects_the_class():
    actor = omega_conf_to_dataclass(
        OmegaConf.create(
            {"_target_": "verl.workers.config.ActorConfig", "ppo_mini_batch_size": 16, "optim": {"lr": 2e-6}}
        )
    )
    assert isinstance(actor, ActorConfig) and actor.ppo_mini_batch_size == 16 and actor.optim.lr == 2e-6


def test_bad_keys_and_types_are_refused():
    with pytest.raises(ConfigKeyError, match="ppo_mini_batchsize"):
        omega_conf_to_dataclass({"ppo_mini_batchsize": 16}, ActorConfig)
    with pytest.raises(ValidationError, match="ppo_epochs"):
        omega_conf_to_dataclass({"ppo_epochs": "two"}, ActorConfig)
    with pytest.raises(ValueError, match="dataclass_type"):
        omega_conf_to_dataclass({"lr": 1.0})


def test_dataclass_passes_through():
    optim = OptimConfig()
    assert omega_conf_to_dataclass(optim, OptimConfig) is optim
