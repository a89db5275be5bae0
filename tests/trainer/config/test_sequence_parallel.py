"""Startup checks of ``ulysses_sequence_parallel_size``: world size, remove-padding, the model's heads, batch
arithmetic over ``world / sp`` data-parallel ranks and token budgets scaled by ``sp`` — all before Ray starts."""

from __future__ import annotations

import json

import pytest

from tests.support.models import smollm2_path, tiny_model_path
from verl.trainer.config.loader import CONFIG_DIR, _compose, load_config
from verl.trainer.config.sequence_parallel import model_heads
from verl.trainer.config.sft import SFTConfig, validate_typed
from verl.trainer.config.validation import ConfigError

SP2 = [
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
    "trainer.n_gpus_per_node=2",
    "actor_rollout_ref.model.use_remove_padding=True",  # off by default (verl's); sequence parallelism needs it
]


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    return str(info.value)


def test_sp2_on_a_tiny_model_is_valid_and_shared_by_interpolation():
    cfg = load_config([*SP2, f"actor_rollout_ref.model.path={tiny_model_path('qwen2')}"])
    assert cfg.actor_rollout_ref.ref.ulysses_sequence_parallel_size == 2
    assert cfg.critic.ulysses_sequence_parallel_size == 2
    assert cfg.critic.model.use_remove_padding is True  # follows the actor's model


def test_world_size_must_divide():
    message = _error(["actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "trainer.n_gpus_per_node=1"])
    assert "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2 must divide" in message
    assert "trainer.n_gpus_per_node * trainer.nnodes = 1" in message


def test_needs_remove_padding():
    message = _error(
        [*SP2, f"actor_rollout_ref.model.path={tiny_model_path()}", "actor_rollout_ref.model.use_remove_padding=false"]
    )
    assert "set actor_rollout_ref.model.use_remove_padding=True" in message


def test_heads_of_the_default_model_do_not_split_in_two():
    smollm2_path()  # the embedded model's config.json on disk
    message = _error(SP2)
    assert (
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2 must divide the model's 9 attention heads" in message
    )
    assert "use one of [1, 3, 9]" in message


def test_model_heads_reads_config_json(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"text_config": {"num_attention_heads": 14, "num_key_value_heads": 2}})
    )
    assert model_heads(str(tmp_path)) == (14, 2)
    assert model_heads(str(tmp_path / "missing")) is None


def test_batch_arithmetic_uses_data_parallel_ranks():
    # 4 workers, sp 2: 2 data-parallel ranks; 2 prompts * 4 responses / 2 = 4 sequences per rank; 3 does not divide it
    message = _error(
        [
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
            "actor_rollout_ref.model.use_remove_padding=True",
            "actor_rollout_ref.rollout.n=4",
            "trainer.n_gpus_per_node=4",
            f"actor_rollout_ref.model.path={tiny_model_path()}",
            "data.train_batch_size=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "actor_rollout_ref.actor.use_dynamic_bsz=false",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
        ]
    )
    assert "actor_rollout_ref.actor.ulysses_sequence_parallel_size" in message
    assert "2*4/2 = 4" in message


def test_token_budget_is_scaled_by_sp():
    # 128 + 24 = 152 tokens per sequence: a per-GPU budget of 80 covers 160 tokens with sp 2, 40 does not
    ok = [
        *SP2,
        "data.max_prompt_length=128",
        "data.max_response_length=24",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.model.path={tiny_model_path()}",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=80",
    ]
    load_config(ok)
    message = _error([*ok[:-1], "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40"])
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40 * ulysses_sequence_parallel_size 2" in message
    assert "raise it to >= 76" in message


def test_lora_reference_follows_the_actor():
    message = _error(
        [
            *SP2,
            f"actor_rollout_ref.model.path={tiny_model_path()}",
            "actor_rollout_ref.model.lora_rank=8",
            "actor_rollout_ref.actor.use_kl_loss=true",
            "actor_rollout_ref.ref.ulysses_sequence_parallel_size=1",
        ]
    )
    assert "with LoRA the reference runs on the actor's engine" in message


def test_sft_accepts_sp2():
    cfg = validate_typed(
        _compose(str(CONFIG_DIR), "sft_trainer", ["ulysses_sequence_parallel_size=2", "use_remove_padding=true"]),
        SFTConfig,
    )
    assert cfg.ulysses_sequence_parallel_size == 2 and cfg.model.use_remove_padding


def test_vision_language_models_are_refused(tmp_path):
    config = {"vision_config": {"depth": 2}, "text_config": {"num_attention_heads": 4, "num_key_value_heads": 2}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    message = _error([*SP2, f"actor_rollout_ref.model.path={tmp_path}"])
    assert "is a vision-language model, which sequence parallelism does not support" in message
