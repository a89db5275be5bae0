# Skywork-OR1's adaptive entropy control (He et al., 2025, arXiv:2505.22312, sec. 3.2) on the built-in arithmetic task
# with the embedded SmolLM2-135M-Instruct: each step the entropy coefficient moves by delta_ent_coef towards holding
# the policy's entropy at target_entropy (within [min_ent_coef, max_ent_coef]); the bonus applies only while the
# entropy is at or below the target. CPU or one GPU.
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
    actor_rollout_ref.actor.adaptive_entropy.enabled=True \
    actor_rollout_ref.actor.adaptive_entropy.target_entropy=0.2 \
    actor_rollout_ref.actor.adaptive_entropy.max_ent_coef=0.005 \
    actor_rollout_ref.actor.adaptive_entropy.min_ent_coef=0 \
    actor_rollout_ref.actor.adaptive_entropy.delta_ent_coef=0.0001 \
    actor_rollout_ref.rollout.n=4 \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_entropy_recipe' \
    trainer.experiment_name='smollm2_arithmetic_adaptive_entropy' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.save_freq=-1 \
    trainer.test_freq=10 \
    trainer.total_training_steps=20 "$@"
