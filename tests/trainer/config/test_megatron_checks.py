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


RM = ("reward_model.enable=True", "reward_model.micro_batch_size=4")


def test_reward_model_follows_the_actor_layout_unless_it_has_its_own_pool(tmp_path):
    rm_path = f"reward_model.model.path={tmp_path}"  # an existing folder without config.json: no model check
    cfg = _load(*TP2, NO_SP, *RM, rm_path)
    rm = cfg.reward_model
    assert rm.strategy == "megatron" and rm.megatron.tensor_model_parallel_size == 2
    assert rm.megatron.sequence_parallel is False
    assert rm.micro_batch_size_per_gpu == 4  # 2 ranks at TP=2: one data-parallel rank gets the whole batch
    message = _error(*TP2, NO_SP, *RM, rm_path, "reward_model.megatron.tensor_model_parallel_size=1")
    assert "share one worker process" in message and "reward_model: (1, 1, None)" in message
    own_pool = ("reward_model.enable_resource_pool=True", "reward_model.nnodes=1")
    _load(*TP2, NO_SP, *RM, rm_path, *own_pool, "reward_model.n_gpus_per_node=1",
          "reward_model.megatron.tensor_model_parallel_size=1")  # fmt: skip
    message = _error(*TP2, NO_SP, *RM, rm_path, *own_pool, "reward_model.n_gpus_per_node=3")
    assert "reward_model.megatron.tensor_model_parallel_size * pipeline_model_parallel_size = 2*1" in message
    assert "must divide reward_model.n_gpus_per_node * reward_model.nnodes = 3" in message
    # on the FSDP root config a reward model may still run on megatron; its model is checked against its layout
    message = _error(*RM, f"reward_model.model.path={tiny_model_path('llama')}", "reward_model.strategy=megatron",
                     "trainer.n_gpus_per_node=4", "reward_model.megatron.tensor_model_parallel_size=4",
                     "reward_model.megatron.sequence_parallel=False", config_name="ppo_trainer")  # fmt: skip
    assert "reward_model.megatron (model" in message and "must divide the attention heads (4)" in message


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
