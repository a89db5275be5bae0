"""verl-style command lines compose unchanged and give the typed values they spell out."""

from __future__ import annotations

import shlex

import pytest

from verl.trainer.config import PPOConfig
from verl.trainer.config.loader import check_overrides, compose_config, compose_config_file, load_config
from verl.trainer.config.validation import ConfigError, validate_config
from verl.workers.config import FSDPActorConfig, OptimConfig, RolloutConfig, SamplingConfig

ISSUE_LINE = (
    "algorithm.adv_estimator=grpo data.train_batch_size=1024 actor_rollout_ref.rollout.n=5 "
    "actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_type=low_var_kl "
    "actor_rollout_ref.rollout.name=vllm trainer.n_gpus_per_node=8"
)

# verl's examples/grpo_trainer/run_qwen2-7b.sh, as users run it.
GRPO_LINE = """
algorithm.adv_estimator=grpo data.train_files=/data/gsm8k/train.parquet data.val_files=/data/gsm8k/test.parquet
data.train_batch_size=1024 data.max_prompt_length=512 data.max_response_length=1024
data.filter_overlong_prompts=True data.truncation='error' actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct
actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.model.use_remove_padding=True
actor_rollout_ref.actor.ppo_mini_batch_size=256 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40
actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001
actor_rollout_ref.actor.kl_loss_type=low_var_kl actor_rollout_ref.actor.entropy_coeff=0
actor_rollout_ref.model.enable_gradient_checkpointing=True actor_rollout_ref.actor.fsdp_config.param_offload=False
actor_rollout_ref.actor.fsdp_config.optimizer_offload=False
actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40 actor_rollout_ref.rollout.tensor_model_parallel_size=2
actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=0.6 actor_rollout_ref.rollout.n=5
actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40 actor_rollout_ref.ref.fsdp_config.param_offload=True
algorithm.use_kl_in_reward=False trainer.critic_warmup=0 trainer.logger='["console","wandb"]'
trainer.project_name='verl_grpo_example_gsm8k' trainer.experiment_name='qwen2_7b_function_rm'
trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.save_freq=20 trainer.test_freq=5 trainer.total_epochs=15
"""

# verl's examples/ppo_trainer/run_gemma.sh style: PPO with a critic and GAE.
PPO_GAE_LINE = """
algorithm.adv_estimator=gae data.train_batch_size=512 data.max_prompt_length=1024 data.max_response_length=512
actor_rollout_ref.model.path=google/gemma-2-2b-it actor_rollout_ref.actor.optim.lr=1e-6
actor_rollout_ref.actor.ppo_mini_batch_size=128 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.n=1
critic.optim.lr=1e-5 critic.model.use_remove_padding=False critic.model.path=google/gemma-2-2b-it
critic.model.enable_gradient_checkpointing=False critic.ppo_micro_batch_size_per_gpu=4
critic.model.fsdp_config.param_offload=False critic.model.fsdp_config.optimizer_offload=False
critic.cliprange_value=0.2 algorithm.use_kl_in_reward=False algorithm.gamma=0.99 algorithm.lam=0.95
trainer.critic_warmup=0 trainer.n_gpus_per_node=2 trainer.nnodes=1 trainer.total_epochs=15
"""

# recipe/dapo/run_dapo_qwen2.5_32b.sh style.
DAPO_LINE = """
data.train_batch_size=512 data.gen_batch_size=1536 data.max_prompt_length=2048 data.max_response_length=20480
algorithm.adv_estimator=grpo algorithm.use_kl_in_reward=False algorithm.kl_ctrl.kl_coef=0.0
actor_rollout_ref.actor.use_kl_loss=False actor_rollout_ref.actor.kl_loss_coef=0.0
actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28
actor_rollout_ref.actor.clip_ratio_c=10.0 algorithm.filter_groups.enable=True algorithm.filter_groups.metric=acc
algorithm.filter_groups.max_num_gen_batches=10 actor_rollout_ref.actor.loss_agg_mode=token-mean
actor_rollout_ref.rollout.n=16 actor_rollout_ref.actor.ppo_mini_batch_size=32
actor_rollout_ref.actor.use_dynamic_bsz=True actor_rollout_ref.actor.ppo_max_token_len_per_gpu=22528
actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.optim.lr_warmup_steps=10
actor_rollout_ref.actor.optim.weight_decay=0.1 actor_rollout_ref.actor.grad_clip=1.0
actor_rollout_ref.rollout.gpu_memory_utilization=0.8 actor_rollout_ref.rollout.tensor_model_parallel_size=4
actor_rollout_ref.rollout.enable_chunked_prefill=True actor_rollout_ref.rollout.max_num_batched_tokens=22528
actor_rollout_ref.rollout.temperature=1.0 actor_rollout_ref.rollout.top_p=1.0 actor_rollout_ref.rollout.top_k=-1
actor_rollout_ref.rollout.val_kwargs.temperature=1.0 actor_rollout_ref.rollout.val_kwargs.top_p=0.7
actor_rollout_ref.rollout.val_kwargs.do_sample=True actor_rollout_ref.rollout.val_kwargs.n=1
reward_model.reward_manager=dapo +reward_model.reward_kwargs.overlong_buffer_cfg.enable=True
+reward_model.reward_kwargs.overlong_buffer_cfg.len=4096
+reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0
+reward_model.reward_kwargs.overlong_buffer_cfg.log=False +reward_model.reward_kwargs.max_resp_len=20480
trainer.logger='["console","wandb"]' trainer.n_gpus_per_node=8 trainer.nnodes=2 trainer.val_before_train=True
trainer.test_freq=5 trainer.save_freq=5 trainer.total_epochs=1 trainer.resume_mode=auto
actor_rollout_ref.model.path=Qwen/Qwen2.5-32B
"""

RLOO_LINE = """
algorithm.adv_estimator=rloo data.train_batch_size=1024 actor_rollout_ref.actor.ppo_mini_batch_size=256
actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=80 actor_rollout_ref.actor.use_kl_loss=False
actor_rollout_ref.rollout.n=5 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=160
algorithm.use_kl_in_reward=True algorithm.kl_penalty=kl algorithm.kl_ctrl.kl_coef=0.001
actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=160 trainer.n_gpus_per_node=8
"""

REINFORCE_PP_LINE = """
algorithm.adv_estimator=reinforce_plus_plus data.train_batch_size=1024 actor_rollout_ref.actor.optim.lr=3e-6
actor_rollout_ref.actor.ppo_mini_batch_size=1024 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001
actor_rollout_ref.actor.kl_loss_type=mse actor_rollout_ref.rollout.n=8 actor_rollout_ref.rollout.temperature=1.2
actor_rollout_ref.actor.optim.lr_scheduler_type=cosine actor_rollout_ref.actor.optim.min_lr_ratio=0.1
algorithm.use_kl_in_reward=False trainer.n_gpus_per_node=8
"""


def _load(line: str) -> PPOConfig:
    return load_config(shlex.split(line))


def test_default_config_is_typed_and_ties_shared_values():
    cfg = _load("")
    assert isinstance(cfg, PPOConfig)
    assert isinstance(cfg.actor_rollout_ref.actor, FSDPActorConfig)
    assert isinstance(cfg.actor_rollout_ref.rollout, RolloutConfig)
    assert isinstance(cfg.actor_rollout_ref.rollout.val_kwargs, SamplingConfig)
    assert isinstance(cfg.critic.optim, OptimConfig)
    assert cfg.actor_rollout_ref.rollout.response_length == cfg.data.max_response_length
    assert cfg.critic.model.path == cfg.actor_rollout_ref.model.path == "default"
    assert cfg.data.train_files == "arithmetic"
    # verl's learning rates: 1e-6 for the actor, 1e-5 for the critic (ppo_demo presets the actor's to 1e-5)
    assert cfg.critic.optim.lr == 1e-5 and cfg.actor_rollout_ref.actor.optim.lr == 1e-6
    assert cfg.trainer.default_local_dir == "checkpoints/verl_examples/arithmetic"


def test_issue_command_line():
    cfg = _load(ISSUE_LINE)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.data.train_batch_size == 1024
    assert cfg.actor_rollout_ref.rollout.n == 5
    assert cfg.actor_rollout_ref.actor.use_kl_loss is True
    assert cfg.actor_rollout_ref.actor.kl_loss_type == "low_var_kl"
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    assert cfg.trainer.n_gpus_per_node == 8
    assert cfg.critic.rollout_n == 5  # tied to rollout.n


def test_grpo_example_line():
    cfg = _load(GRPO_LINE)
    actor, rollout, ref = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.ref
    assert cfg.data.train_files == "/data/gsm8k/train.parquet"
    assert (cfg.data.max_prompt_length, cfg.data.max_response_length) == (512, 1024)
    assert (rollout.prompt_length, rollout.response_length) == (512, 1024)
    assert cfg.actor_rollout_ref.model.path == "Qwen/Qwen2-7B-Instruct"
    assert cfg.actor_rollout_ref.model.use_remove_padding is True
    assert (actor.ppo_mini_batch_size, actor.ppo_micro_batch_size_per_gpu) == (256, 40)
    assert actor.kl_loss_coef == 0.001 and isinstance(actor.entropy_coeff, float) and actor.entropy_coeff == 0.0
    assert actor.fsdp_config.param_offload is False and ref.fsdp_config.param_offload is True
    assert rollout.tensor_model_parallel_size == 2 and rollout.gpu_memory_utilization == 0.6
    assert ref.log_prob_micro_batch_size_per_gpu == 40
    assert cfg.trainer.logger == ["console", "wandb"]
    assert cfg.trainer.experiment_name == "qwen2_7b_function_rm"
    assert (cfg.trainer.save_freq, cfg.trainer.test_freq, cfg.trainer.total_epochs) == (20, 5, 15)
    assert cfg.trainer.default_local_dir == "checkpoints/verl_grpo_example_gsm8k/qwen2_7b_function_rm"


def test_ppo_with_critic_line():
    cfg = _load(PPO_GAE_LINE)
    assert cfg.algorithm.adv_estimator == "gae"
    assert (cfg.algorithm.gamma, cfg.algorithm.lam) == (0.99, 0.95)
    assert cfg.critic.model.path == "google/gemma-2-2b-it"
    assert cfg.critic.optim.lr == 1e-5 and cfg.critic.cliprange_value == 0.2
    assert cfg.critic.ppo_mini_batch_size == 128  # follows the actor
    assert cfg.critic.ppo_micro_batch_size_per_gpu == 4
    assert cfg.critic.forward_micro_batch_size_per_gpu == 4
    assert cfg.critic.model.fsdp_config.optimizer_offload is False


def test_dapo_like_line():
    cfg = _load(DAPO_LINE)
    actor = cfg.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.28, 10.0)
    assert cfg.data.gen_batch_size == 1536
    assert cfg.algorithm.filter_groups.enable is True and cfg.algorithm.filter_groups.metric == "acc"
    assert cfg.algorithm.filter_groups.max_num_gen_batches == 10
    assert actor.use_dynamic_bsz is True and actor.ppo_max_token_len_per_gpu == 22528
    assert actor.optim.lr_warmup_steps == 10 and actor.optim.weight_decay == 0.1
    assert cfg.actor_rollout_ref.rollout.val_kwargs.top_p == 0.7
    assert cfg.actor_rollout_ref.rollout.val_kwargs.do_sample is True
    assert cfg.reward_model.reward_manager == "dapo"
    assert cfg.reward_model.reward_kwargs["overlong_buffer_cfg"] == {
        "enable": True,
        "len": 4096,
        "penalty_factor": 1.0,
        "log": False,
    }
    assert cfg.reward_model.reward_kwargs["max_resp_len"] == 20480
    assert cfg.trainer.nnodes == 2


def test_rloo_line():
    cfg = _load(RLOO_LINE)
    assert cfg.algorithm.adv_estimator == "rloo"
    assert cfg.algorithm.use_kl_in_reward is True and cfg.algorithm.kl_ctrl.kl_coef == 0.001
    assert cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 160


def test_reinforce_plus_plus_line():
    cfg = _load(REINFORCE_PP_LINE)
    optim = cfg.actor_rollout_ref.actor.optim
    assert cfg.algorithm.adv_estimator == "reinforce_plus_plus"
    assert optim.lr == 3e-6 and optim.lr_scheduler_type == "cosine" and optim.min_lr_ratio == 0.1
    assert cfg.actor_rollout_ref.actor.kl_loss_type == "mse"
    assert cfg.actor_rollout_ref.rollout.temperature == 1.2


def test_rollout_group_selects_hf():
    assert _load("rollout@actor_rollout_ref.rollout=hf").actor_rollout_ref.rollout.name == "hf"
    assert _load("actor_rollout_ref.rollout.name=hf").actor_rollout_ref.rollout.name == "hf"


def test_fsdp2_strategy_accepted_and_followed_by_ref_and_critic():
    cfg = _load("actor_rollout_ref.actor.strategy=fsdp2")
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp2"
    assert cfg.actor_rollout_ref.ref.strategy == "fsdp2" and cfg.critic.strategy == "fsdp2"


def test_check_overrides_accepts_groups_additions_and_free_mappings():
    check_overrides(
        [
            "rollout@actor_rollout_ref.rollout=hf",
            "+reward_model.reward_kwargs.overlong_buffer_cfg.len=4",
            "actor_rollout_ref.model.override_config.attention_dropout=0.0",
            "hydra.run.dir=/tmp/x",
            "--cfg",
            "job",
        ]
    )
    with pytest.raises(ConfigError, match=r"'data\.max_prompt_length'"):
        check_overrides(["data.max_prompt_len=4"])


def test_compose_config_file_builds_on_ppo_trainer(tmp_path):
    (tmp_path / "my_run.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\ndata:\n  max_response_length: 32\nactor_rollout_ref:\n"
        "  rollout:\n    n: 2\n"
    )
    cfg = compose_config_file(tmp_path / "my_run.yaml", ["trainer.total_epochs=3"])
    typed = validate_config(cfg)
    assert typed.actor_rollout_ref.rollout.response_length == 32
    assert typed.actor_rollout_ref.rollout.n == 2 and typed.trainer.total_epochs == 3


def test_compose_config_returns_dictconfig_with_interpolations():
    raw = compose_config(["data.max_response_length=48"])
    assert raw.actor_rollout_ref.rollout.response_length == 48


def test_deprecated_global_micro_batch_sizes_become_per_worker():
    cfg = _load(
        "algorithm.adv_estimator=gae actor_rollout_ref.rollout.n=1 data.train_batch_size=256 "
        "actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size=64 "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size=128 critic.ppo_micro_batch_size=32 "
        "trainer.n_gpus_per_node=8"
    )
    assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 8  # 64 / 8 workers
    assert cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 16  # 128 / 8
    assert cfg.critic.ppo_micro_batch_size_per_gpu == 4  # 32 / 8
    with pytest.raises(ConfigError, match=r"actor_rollout_ref\.actor\.ppo_micro_batch_size=12 .* multiple of"):
        _load("actor_rollout_ref.actor.ppo_micro_batch_size=12 trainer.n_gpus_per_node=8")
