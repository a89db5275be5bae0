# KL-Cov (Cui et al., 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
# arXiv:2505.22617) on the built-in arithmetic task with the embedded SmolLM2-135M-Instruct: a KL penalty on a small
# fraction of high-covariance tokens keeps the policy's entropy from collapsing. CPU or one GPU.
set -x

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=arithmetic \
    data.val_files=arithmetic \
    data.train_batch_size=8 \
    data.max_response_length=24 \
    data.val_max_samples=64 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.actor.optim.lr=1e-5 \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
    actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov \
    actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.0002 \
    actor_rollout_ref.actor.policy_loss.ppo_kl_coef=0.1 \
    actor_rollout_ref.rollout.n=4 \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_entropy_recipe' \
    trainer.experiment_name='smollm2_arithmetic_kl_cov' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.save_freq=-1 \
    trainer.test_freq=10 \
    trainer.total_training_steps=20 "$@"
