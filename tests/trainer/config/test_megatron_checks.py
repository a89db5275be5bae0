"""``--config-name ppo_megatron_trainer`` composes like ppo_trainer with every role on the Megatron engine, and the
Megatron cross-field checks fail before Ray starts, naming the keys and the fix."""

from __future__ import annotations

import pytest

from tests.support.models import tiny_model_path
from verl.trainer.config.loader import ConfigError, load_config


def _load(*overrides: str, config_name: str = "ppo_megatron_trainer"):
    base = [f"actor_rollout_ref.model.path={tiny_model_path('llama')}", "trainer.device=cpu"]
    return load_config([*base, *overrides], config_name=config_name)


def _error(*overrides: str, config_name: str = "ppo_megatron_trainer") -> str:
    with pytest.raises(ConfigError) as info:
        _load(*overrides, config_name=config_name)
    return str(info.value)


TP2 = ("trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2")
NO_SP = "actor_rollout_ref.actor.megatron.sequence_parallel=False"


def test_megatron_config_composes_and_roles_follow_the_actor_layout():
    cfg = _load(*TP2, NO_SP, "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
                "trainer.n_gpus_per_node=4", "critic.enable=True")  # fmt: skip
    actor, ref, critic = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.ref, cfg.critic
    assert actor.strategy == ref.strategy == critic.strategy == "megatron"
    for role in (actor, ref, critic):
        assert (role.megatron.tensor_model_parallel_size, role.megatron.pipeline_model_parallel_size) == (2, 2)
        assert role.megatron.sequence_parallel is False
    # the FSDP root config is untouched
    assert _load(config_name="ppo_trainer").actor_rollout_ref.actor.strategy == "fsdp"


def test_batch_arithmetic_uses_the_data_parallel_size():
    # 4 ranks, TP=2: 2 data-parallel ranks; 4 prompts x n=2 = 8 sequences per mini-batch -> 4 per rank
    base = (
        *TP2,
        NO_SP,
        "trainer.n_gpus_per_node=4",
        "data.train_batch_size=4",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
    )
    _load(*base, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4")
    message = _error(*base, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3")
    assert "megatron tensor * pipeline parallel size" in message and "= 4; set it to a divisor of 4" in message


def test_megatron_errors_name_keys_and_fixes():
    assert "sequence_parallel=True needs CUDA" in _error(*TP2)
    message = _error(
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4", NO_SP, "trainer.n_gpus_per_node=4"
    )
    assert "must divide the attention heads (4) and the key/value heads (2)" in message
    assert "must divide trainer.n_gpus_per_node * trainer.nnodes = 1" in _error(*TP2[1:], NO_SP)
    message = _error(*TP2, NO_SP, "critic.enable=True", "critic.megatron.tensor_model_parallel_size=1")
    assert "share one worker process" in message and "critic: (1, 1, None)" in message
    assert "lora_rank > 0 is not supported with strategy=megatron" in _error("actor_rollout_ref.model.lora_rank=8")
    message = _error("actor_rollout_ref.ref.strategy=fsdp", "actor_rollout_ref.actor.use_kl_loss=True")
    assert "actor_rollout_ref.ref.strategy='fsdp' must match actor_rollout_ref.actor.strategy='megatron'" in message
    message = _error("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", config_name="ppo_trainer")
    assert "actor_rollout_ref.actor.megatron is set but actor_rollout_ref.actor.strategy='fsdp'" in message


def test_unpacked_micro_batches_are_pinned():
    """The engine always packs micro-batches (thd); verl's megatron.use_remove_padding=False waits on issue 16."""
    assert _load(
        "actor_rollout_ref.actor.megatron.use_remove_padding=True"
    ).actor_rollout_ref.actor.megatron.use_remove_padding
    message = _error("actor_rollout_ref.actor.megatron.use_remove_padding=False")
    assert "not supported yet: Megatron padded (bshd) micro-batches (issue 16)" in message
