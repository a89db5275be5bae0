"""``ppo_trainer`` gives public verl's defaults; ``ppo_demo`` adds the embedded demo's presets and nothing else.

The reference is a hand-written table of verl's defaults, read off volcengine/verl's
``verl/trainer/config/_generated_ppo_trainer.yaml`` (the flattened ``ppo_trainer.yaml``: ``actor/actor.yaml``,
``actor/dp_actor.yaml``, ``rollout/rollout.yaml``, ``critic/critic.yaml``, ``data/legacy_data.yaml``,
``model/hf_model.yaml``, ``reward_model/reward_model.yaml`` and the trainer/algorithm sections) and
``data/legacy_data.yaml`` for ``train_max_samples`` / ``val_max_samples``. A verl run script that leaves one of these
keys unset must train as it does with verl.

Not in the table, on purpose: keys whose verl default cannot run here or names verl's own files (``model.path``,
``data.train_files``: the embedded SmolLM2 and the built-in task; ``trainer.logger`` with wandb; ``trainer.device``
``cuda``; ``rollout.name`` ``???``; ``trainer.experiment_name`` ``gsm8k``), and layout or speed settings that leave the
trained numbers alone (``trainer.n_gpus_per_node`` 8, ``rollout.tensor_model_parallel_size`` 2,
``rollout.gpu_memory_utilization`` 0.5, ``rollout.enforce_eager`` False, ``use_torch_compile`` True,
``model.enable_gradient_checkpointing`` True, ``data.dataloader_num_workers`` 8, the micro-batch sizes verl leaves
null and then rejects); docs/config_reference.md lists this build's values.
"""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from verl.trainer.config.loader import compose_config, load_config
from verl.trainer.config.root import PPOConfig

ARR = "actor_rollout_ref"

VERL_DEFAULTS = {
    # data (legacy_data.yaml)
    "data.train_batch_size": 1024,
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "data.val_batch_size": None,
    "data.train_max_samples": -1,
    "data.val_max_samples": -1,
    "data.shuffle": True,
    "data.validation_shuffle": False,
    "data.return_raw_chat": False,
    "data.return_raw_input_ids": False,
    "data.return_full_prompt": False,
    "data.filter_overlong_prompts": False,
    "data.truncation": "error",
    "data.prompt_key": "prompt",
    "data.reward_fn_key": "data_source",
    # the policy model (model/hf_model.yaml)
    f"{ARR}.hybrid_engine": True,
    f"{ARR}.model.use_remove_padding": False,
    f"{ARR}.model.use_fused_kernels": False,
    f"{ARR}.model.lora_rank": 0,
    f"{ARR}.model.lora_alpha": 16,
    f"{ARR}.model.target_modules": "all-linear",
    f"{ARR}.model.trust_remote_code": False,
    f"{ARR}.model.override_config": {},
    # the actor (actor/actor.yaml, actor/dp_actor.yaml)
    f"{ARR}.actor.strategy": "fsdp",
    f"{ARR}.actor.ppo_mini_batch_size": 256,
    f"{ARR}.actor.use_dynamic_bsz": False,
    f"{ARR}.actor.ppo_max_token_len_per_gpu": 16384,
    f"{ARR}.actor.ppo_epochs": 1,
    f"{ARR}.actor.shuffle": False,
    f"{ARR}.actor.clip_ratio": 0.2,
    f"{ARR}.actor.clip_ratio_low": 0.2,
    f"{ARR}.actor.clip_ratio_high": 0.2,
    f"{ARR}.actor.clip_ratio_c": 3.0,
    f"{ARR}.actor.loss_agg_mode": "token-mean",
    f"{ARR}.actor.entropy_coeff": 0.0,
    f"{ARR}.actor.use_kl_loss": False,
    f"{ARR}.actor.kl_loss_coef": 0.001,
    f"{ARR}.actor.kl_loss_type": "low_var_kl",
    f"{ARR}.actor.grad_clip": 1.0,
    f"{ARR}.actor.ulysses_sequence_parallel_size": 1,
    f"{ARR}.actor.policy_loss.loss_mode": "vanilla",
    f"{ARR}.actor.checkpoint.save_contents": ["model", "optimizer", "extra"],
    f"{ARR}.actor.optim.lr": 1e-6,
    f"{ARR}.actor.optim.weight_decay": 0.01,
    f"{ARR}.actor.optim.betas": [0.9, 0.999],
    f"{ARR}.actor.optim.lr_warmup_steps": -1,
    f"{ARR}.actor.optim.lr_warmup_steps_ratio": 0.0,
    f"{ARR}.actor.optim.min_lr_ratio": 0.0,
    f"{ARR}.actor.optim.num_cycles": 0.5,
    f"{ARR}.actor.fsdp_config.param_offload": False,
    f"{ARR}.actor.fsdp_config.optimizer_offload": False,
    f"{ARR}.actor.fsdp_config.reshard_after_forward": True,
    f"{ARR}.actor.fsdp_config.fsdp_size": -1,
    f"{ARR}.actor.fsdp_config.model_dtype": "fp32",
    # the reference (ref/ref.yaml): its micro-batching follows the actor's
    f"{ARR}.ref.log_prob_use_dynamic_bsz": False,
    f"{ARR}.ref.log_prob_max_token_len_per_gpu": 16384,
    # the rollout (rollout/rollout.yaml)
    f"{ARR}.rollout.n": 1,
    f"{ARR}.rollout.dtype": "bfloat16",
    f"{ARR}.rollout.temperature": 1.0,
    f"{ARR}.rollout.top_k": -1,
    f"{ARR}.rollout.top_p": 1.0,
    f"{ARR}.rollout.do_sample": True,
    f"{ARR}.rollout.prompt_length": 512,
    f"{ARR}.rollout.response_length": 512,
    f"{ARR}.rollout.ignore_eos": False,
    f"{ARR}.rollout.free_cache_engine": True,
    f"{ARR}.rollout.load_format": "dummy",
    f"{ARR}.rollout.max_num_batched_tokens": 8192,
    f"{ARR}.rollout.max_num_seqs": 1024,
    f"{ARR}.rollout.max_model_len": None,
    f"{ARR}.rollout.enable_chunked_prefill": True,
    f"{ARR}.rollout.enable_prefix_caching": True,
    f"{ARR}.rollout.calculate_log_probs": False,
    f"{ARR}.rollout.log_prob_use_dynamic_bsz": False,
    f"{ARR}.rollout.log_prob_max_token_len_per_gpu": 16384,
    f"{ARR}.rollout.val_kwargs.temperature": 0.0,
    f"{ARR}.rollout.val_kwargs.top_k": -1,
    f"{ARR}.rollout.val_kwargs.top_p": 1.0,
    f"{ARR}.rollout.val_kwargs.n": 1,
    f"{ARR}.rollout.val_kwargs.do_sample": False,
    f"{ARR}.rollout.multi_turn.enable": False,
    f"{ARR}.rollout.multi_turn.max_parallel_calls": 1,
    f"{ARR}.rollout.multi_turn.max_tool_response_length": 256,
    f"{ARR}.rollout.multi_turn.tool_response_truncate_side": "middle",
    f"{ARR}.rollout.multi_turn.format": "hermes",
    f"{ARR}.rollout.agent.num_workers": 8,
    # the critic (critic/critic.yaml): batching follows the actor's, its own lr and token budget
    "critic.enable": None,
    "critic.optim.lr": 1e-5,
    "critic.ppo_mini_batch_size": 256,
    "critic.use_dynamic_bsz": False,
    "critic.ppo_max_token_len_per_gpu": 32768,
    "critic.forward_max_token_len_per_gpu": 32768,
    "critic.ppo_epochs": 1,
    "critic.shuffle": False,
    "critic.cliprange_value": 0.5,
    "critic.loss_agg_mode": "token-mean",
    "critic.grad_clip": 1.0,
    "critic.rollout_n": 1,
    "critic.model.use_remove_padding": False,
    # rewards (reward_model/reward_model.yaml)
    "reward_model.enable": False,
    "reward_model.reward_manager": "naive",
    "reward_model.launch_reward_fn_async": False,
    "reward_model.use_dynamic_bsz": False,
    "reward_model.forward_max_token_len_per_gpu": 32768,
    "reward_model.micro_batch_size_per_gpu": None,
    "reward_model.max_length": None,
    "reward_model.enable_resource_pool": False,
    "reward_model.sandbox_fusion.url": None,
    "reward_model.sandbox_fusion.max_concurrent": 64,
    "reward_model.sandbox_fusion.memory_limit_mb": 1024,
    "custom_reward_function.path": None,
    "custom_reward_function.name": "compute_score",
    # the algorithm
    "algorithm.adv_estimator": "gae",
    "algorithm.gamma": 1.0,
    "algorithm.lam": 1.0,
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.use_kl_in_reward": False,
    "algorithm.kl_penalty": "kl",
    "algorithm.kl_ctrl.type": "fixed",
    "algorithm.kl_ctrl.kl_coef": 0.001,
    "algorithm.kl_ctrl.horizon": 10000,
    "algorithm.kl_ctrl.target_kl": 0.1,
    # the trainer
    "trainer.balance_batch": True,
    "trainer.total_epochs": 30,
    "trainer.total_training_steps": None,
    "trainer.project_name": "verl_examples",
    "trainer.log_val_generations": 0,
    "trainer.nnodes": 1,
    "trainer.save_freq": -1,
    "trainer.test_freq": -1,
    "trainer.resume_mode": "auto",
    "trainer.resume_from_path": None,
    "trainer.val_before_train": True,
    "trainer.val_only": False,
    "trainer.critic_warmup": 0,
    "trainer.default_local_dir": "checkpoints/verl_examples/arithmetic",  # verl's pattern: project/experiment
    "trainer.default_hdfs_dir": None,
    "trainer.max_actor_ckpt_to_keep": None,
    "trainer.max_critic_ckpt_to_keep": None,
    "trainer.ray_wait_register_center_timeout": 300,
}
"""verl's default of each behaviour-relevant key, written out by hand (not read from our code)."""

DEMO_PRESETS = {
    "data.train_batch_size": 8,
    "data.max_prompt_length": 128,
    "data.max_response_length": 24,
    "data.val_max_samples": 64,
    "trainer.total_epochs": 1,
    "trainer.total_training_steps": 24,
    "trainer.test_freq": 24,
    "algorithm.adv_estimator": "grpo",
    f"{ARR}.model.use_remove_padding": True,
    f"{ARR}.actor.optim.lr": 1e-5,
    f"{ARR}.actor.ppo_mini_batch_size": 8,  # ${data.train_batch_size}: one optimizer step per batch
    f"{ARR}.actor.use_dynamic_bsz": True,
    f"{ARR}.rollout.dtype": "float32",
    f"{ARR}.rollout.n": 4,
}
"""What ``make demo`` (``--config-name ppo_demo``) runs with: GRPO sized for a 2-core CPU (docs/quickstart.md)."""

FOLLOWERS = {
    # keys tied by interpolation to a demo preset (the same in verl: rollout.yaml, ref.yaml, critic.yaml)
    f"{ARR}.rollout.prompt_length": 128,
    f"{ARR}.rollout.response_length": 24,
    f"{ARR}.rollout.log_prob_use_dynamic_bsz": True,
    f"{ARR}.ref.log_prob_use_dynamic_bsz": True,
    "critic.ppo_mini_batch_size": 8,
    "critic.use_dynamic_bsz": True,
    "critic.rollout_n": 4,
    "critic.model.use_remove_padding": True,
    "reward_model.use_dynamic_bsz": True,
}


def _flat(node, prefix: str = "") -> dict:
    if isinstance(node, dict) and node:
        flat = {}
        for key, value in node.items():
            flat.update(_flat(value, f"{prefix}.{key}" if prefix else key))
        return flat
    return {prefix: node}


def _composed(config_name: str) -> dict:
    return _flat(OmegaConf.to_container(compose_config([], config_name=config_name), resolve=True))


def _mismatches(values: dict, expected: dict) -> dict:
    return {key: (values.get(key, "<missing>"), want) for key, want in expected.items() if values.get(key) != want}


@pytest.mark.parametrize("config_name", ["ppo_trainer", "ppo_megatron_trainer"])
def test_the_root_configs_have_verls_defaults(config_name):
    values = _composed(config_name)
    expected = dict(VERL_DEFAULTS)
    if config_name == "ppo_megatron_trainer":  # verl's megatron_actor.yaml: the same keys on the Megatron engine
        expected[f"{ARR}.actor.strategy"] = "megatron"
        expected = {k: v for k, v in expected.items() if ".fsdp_config." not in k}
    assert _mismatches(values, expected) == {}


def test_the_dataclasses_alone_have_verls_defaults():
    """The YAML only ties keys together: the typed defaults are verl's too (a config built in Python, or a recipe
    tree, starts from them)."""
    values = _flat(dataclasses.asdict(PPOConfig()))
    tied = {  # set by interpolation in ppo_trainer.yaml (to another key's verl default)
        "critic.forward_max_token_len_per_gpu",
        "reward_model.forward_max_token_len_per_gpu",
        "reward_model.use_dynamic_bsz",
        "trainer.default_local_dir",
    }
    assert _mismatches(values, {k: v for k, v in VERL_DEFAULTS.items() if k not in tied}) == {}


def test_the_demo_config_adds_the_demo_presets_and_nothing_else():
    verl, demo = _composed("ppo_trainer"), _composed("ppo_demo")
    assert _mismatches(demo, DEMO_PRESETS | FOLLOWERS) == {}
    changed = {key for key in demo if demo[key] != verl.get(key)}
    assert changed == set(DEMO_PRESETS) | set(FOLLOWERS)


def test_the_demo_config_validates_and_keeps_overrides():
    config = load_config(["data.train_batch_size=16", "actor_rollout_ref.rollout.n=2"], config_name="ppo_demo")
    assert config.data.train_batch_size == 16 and config.actor_rollout_ref.actor.ppo_mini_batch_size == 16
    assert config.actor_rollout_ref.rollout.n == 2 and config.critic.rollout_n == 2
    assert config.algorithm.adv_estimator == "grpo"
