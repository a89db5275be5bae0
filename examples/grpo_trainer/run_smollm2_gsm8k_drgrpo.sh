# Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): no std normalisation of group advantages and
# a sequence-length-independent loss ("seq-mean-token-sum-norm"), no KL.
set -x

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.norm_adv_by_std_in_grpo=False \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.val_max_samples=-1 \
    data.train_batch_size=64 \
    data.max_prompt_length=384 \
    data.max_response_length=256 \
    data.filter_overlong_prompts=True \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.dtype=bfloat16 \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.n=4 \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_grpo_example_gsm8k' \
    trainer.experiment_name='smollm2_135m_drgrpo' \
    trainer.n_gpus_per_node=1 \
    trainer.test_freq=10 \
    trainer.total_training_steps=50 "$@"
