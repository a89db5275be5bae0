"""Each class of bad input fails before anything starts, with a message naming the key(s) and the fix."""

from __future__ import annotations

import pytest

from verl.trainer.config.loader import compose_config, load_config
from verl.trainer.config.validation import ConfigError, validate_config


def _error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    return str(info.value)


def test_unknown_override_names_nearest_key():
    message = _error(["actor_rollout_ref.actor.ppo_mini_batchsize=4"])
    assert "'actor_rollout_ref.actor.ppo_mini_batchsize'" in message
    assert "did you mean 'actor_rollout_ref.actor.ppo_mini_batch_size'" in message


def test_key_at_the_wrong_level_points_to_where_it_lives():
    message = _error(["actor_rollout_ref.actor.temperature=0.7"])
    assert "did you mean 'actor_rollout_ref.rollout.temperature'" in message


def test_added_unknown_key_is_caught_by_validation():
    # '+key=value' passes Hydra; validate_config still rejects it.
    message = _error(["+trainer.n_gpu_per_node=2"])
    assert "unknown key 'trainer.n_gpu_per_node'" in message and "'trainer.n_gpus_per_node'" in message


def test_unknown_key_in_a_dict_config():
    raw = compose_config([])
    raw_dict = {"data": {"max_prompt_lenght": 10}}
    with pytest.raises(
        ConfigError, match=r"unknown key 'data\.max_prompt_lenght'; did you mean 'data\.max_prompt_length'"
    ):
        validate_config(raw_dict)
    assert raw.data.max_prompt_length == 512


def test_wrong_type_names_key():
    message = _error(["data.train_batch_size=many"])
    assert "data.train_batch_size='many' must be an integer" in message
    message = _error(["actor_rollout_ref.actor.use_kl_loss=maybe"])
    assert "actor_rollout_ref.actor.use_kl_loss='maybe' must be a boolean" in message


def test_disallowed_value_lists_allowed_values():
    message = _error(["actor_rollout_ref.actor.strategy=deepspeed"])
    assert (
        "actor_rollout_ref.actor.strategy='deepspeed' is not a registered training engine; "
        "registered: fsdp, fsdp2, megatron" in message
    )
    message = _error(["actor_rollout_ref.rollout.name=tgi"])
    expected = "actor_rollout_ref.rollout.name='tgi' is not a registered rollout; registered: hf, sglang, vllm"
    assert expected in message
    message = _error(["trainer.logger=[console,tensorbord]"])
    assert "trainer.logger='tensorbord' is not a registered logger; registered: console, file" in message
    message = _error(["actor_rollout_ref.actor.kl_loss_type=k9"])
    assert "actor_rollout_ref.actor.kl_loss_type='k9'" in message and "low_var_kl" in message


def test_out_of_range_value_names_range():
    message = _error(["actor_rollout_ref.rollout.n=0"])
    assert "actor_rollout_ref.rollout.n=0 is out of range; allowed: > 0" in message
    assert "critic.rollout_n" not in message  # a copy by interpolation is not reported twice
    message = _error(["actor_rollout_ref.actor.ulysses_sequence_parallel_size=0"])
    assert "actor_rollout_ref.actor.ulysses_sequence_parallel_size=0 is out of range; allowed: > 0" in message
    message = _error(["actor_rollout_ref.rollout.top_p=1.5"])
    assert "actor_rollout_ref.rollout.top_p=1.5 is out of range; allowed: > 0.0 and <= 1.0" in message


def test_batch_not_divisible_by_world_size():
    message = _error(
        [
            "data.train_batch_size=3",
            "actor_rollout_ref.rollout.n=1",
            "trainer.n_gpus_per_node=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=3",
            "algorithm.adv_estimator=reinforce_plus_plus",
        ]
    )
    assert "data.train_batch_size * actor_rollout_ref.rollout.n = 3*1 = 3" in message
    assert "trainer.n_gpus_per_node * trainer.nnodes = 2" in message


def test_train_batch_not_multiple_of_mini_batch():
    message = _error(["data.train_batch_size=12", "actor_rollout_ref.actor.ppo_mini_batch_size=8"])
    assert "data.train_batch_size=12 must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size=8" in message


def test_micro_batch_must_divide_per_worker_mini_batch():
    # 8 prompts * 4 responses / 2 workers = 16 sequences per worker; 5 does not divide 16.
    message = _error(
        [
            "data.train_batch_size=8",
            "actor_rollout_ref.actor.ppo_mini_batch_size=8",
            "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5",
            "trainer.n_gpus_per_node=2",
        ]
    )
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5 must divide" in message
    assert "8*4/2 = 16" in message


def test_lengths_exceed_rollout_context():
    message = _error(
        ["data.max_prompt_length=100", "data.max_response_length=60", "actor_rollout_ref.rollout.max_model_len=150"]
    )
    assert "100+60 = 160 exceeds the engine context actor_rollout_ref.rollout.max_model_len=150" in message
    assert "data.max_prompt_length" in message and "data.max_response_length" in message


def test_gae_without_critic():
    message = _error(["algorithm.adv_estimator=gae", "critic.enable=False"])
    assert "algorithm.adv_estimator=gae needs a critic but critic.enable=False" in message


def test_kl_loss_without_reference_model():
    message = _error(["actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.ref=null"])
    assert "actor_rollout_ref.actor.use_kl_loss=True" in message and "actor_rollout_ref.ref is null" in message
    message = _error(["algorithm.use_kl_in_reward=True", "actor_rollout_ref.ref=null"])
    assert "algorithm.use_kl_in_reward=True" in message


def test_group_estimator_needs_several_responses():
    message = _error(["algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=1"])
    assert "algorithm.adv_estimator=grpo" in message and "actor_rollout_ref.rollout.n > 1" in message


def test_unknown_registered_names_list_the_registry():
    message = _error(["algorithm.adv_estimator=grpo_typo"])
    assert "algorithm.adv_estimator='grpo_typo' is not a registered advantage estimator; registered: " in message
    assert "gae" in message and "rloo" in message
    message = _error(["actor_rollout_ref.actor.policy_loss.loss_mode=vanila"])
    assert (
        "actor_rollout_ref.actor.policy_loss.loss_mode='vanila' is not a registered policy loss" in message
        and "vanilla" in message
    )
    message = _error(["reward_model.reward_manager=naiv"])
    assert "reward_model.reward_manager='naiv' is not a registered reward manager" in message and "naive" in message


def test_overlong_buffer_needs_dapo_manager_and_known_keys():
    message = _error(["reward_model.overlong_buffer.enable=True"])
    assert "reward_model.reward_manager=dapo" in message
    message = _error(["reward_model.reward_manager=dapo", "+reward_model.reward_kwargs.overlong_buffer_cfg.lenght=4"])
    assert "overlong_buffer_cfg has unknown keys ['lenght']" in message


def test_broken_interpolation_names_the_key():
    message = _error(["actor_rollout_ref.rollout.response_length=${data.max_reponse_length}"])
    assert "actor_rollout_ref.rollout.response_length" in message


def test_all_problems_reported_at_once():
    with pytest.raises(ConfigError) as info:
        load_config(["actor_rollout_ref.rollout.n=0", "data.truncation=top"])
    assert len(info.value.errors) >= 2


def test_data_files_must_be_paths():
    message = _error(["data.train_files=[]"])
    assert "data.train_files=[] must be a file path, a list of paths" in message
    message = _error(["data.val_files=3"])
    assert "data.val_files=3 must be a file path" in message


def test_hdfs_checkpoint_mirror_needs_the_hadoop_client(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `hdfs` command
    message = _error(["trainer.default_hdfs_dir=hdfs://namenode/ckpt"])
    assert "trainer.default_hdfs_dir=hdfs://namenode/ckpt needs the Hadoop client" in message
    assert load_config([f"trainer.default_hdfs_dir={tmp_path}/mirror"]).trainer.default_hdfs_dir == f"{tmp_path}/mirror"
