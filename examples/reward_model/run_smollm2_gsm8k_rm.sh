# GRPO on GSM8K with the embedded SmolLM2-135M-Instruct, scored by the GSM8K rule plus a discriminative reward
# model (docs/reward_model.md): score = rule + 0.1 * reward model. The reward model has its own tokenizer and chat
# template (Qwen3), so each chat is re-rendered for it; the reward function runs while the log-probs are computed.
# One GPU; on CPU use actor_rollout_ref.rollout.name=hf and a smaller reward model.
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
set -x

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.val_max_samples=256 \
    data.train_batch_size=64 \
    data.max_prompt_length=384 \
    data.max_response_length=256 \
    data.filter_overlong_prompts=True \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    reward_model.enable=True \
    reward_model.model.path=Skywork/Skywork-Reward-V2-Qwen3-0.6B \
    reward_model.model.use_remove_padding=True \
    reward_model.model.fsdp_config.param_offload=True \
    reward_model.use_dynamic_bsz=True \
    reward_model.forward_max_token_len_per_gpu=8192 \
    reward_model.launch_reward_fn_async=True \
    '+reward_model.combine.weights={rule: 1.0, model: 0.1}' \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_reward_model_example' \
    trainer.experiment_name='smollm2_135m_grpo_rule_plus_rm' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.save_freq=10 \
    trainer.test_freq=10 \
    trainer.total_training_steps=50 "$@"
