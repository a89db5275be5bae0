# DAPO (Yu et al., 2025, arXiv:2503.14476) on the built-in arithmetic task with the embedded SmolLM2-135M-Instruct.
# Runs on CPU (HF or vLLM-CPU rollout) or one GPU: the four DAPO ingredients are all config:
#   clip-higher (clip_ratio_high > clip_ratio_low), token-level loss (token-mean), overlong reward shaping
#   (the dapo reward manager's overlong buffer) and dynamic sampling (filter_groups).
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"

python3 -m verl.trainer.main_ppo \
    "${SMOLLM2_ARITHMETIC[@]}" \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    algorithm.filter_groups.enable=True \
    algorithm.filter_groups.metric=acc \
    algorithm.filter_groups.max_num_gen_batches=4 \
    data.gen_batch_size=12 \
    data.max_prompt_length=128 \
    data.max_response_length=64 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.actor.optim.lr=2e-6 \
    actor_rollout_ref.actor.clip_ratio_low=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.temperature=1.0 \
    reward_model.reward_manager=dapo \
    +reward_model.reward_kwargs.overlong_buffer_cfg.enable=True \
    +reward_model.reward_kwargs.overlong_buffer_cfg.len=16 \
    +reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0 \
    +reward_model.reward_kwargs.max_resp_len=64 \
    trainer.project_name='verl_dapo_recipe' \
    trainer.experiment_name='smollm2_arithmetic_dapo' \
    trainer.test_freq=10 \
    trainer.total_training_steps=20 "$@"
