# PRIME (Cui et al., 2025, arXiv:2502.01456) on the built-in arithmetic task with the embedded SmolLM2-135M-Instruct.
# CPU or one GPU. The implicit PRM starts from the policy, is trained online on the outcome (cross-entropy,
# beta_train) and its token rewards join the outcome reward in PRIME's leave-one-out advantage.
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"

python3 -m recipe.prime.main_prime \
    "${SMOLLM2_ARITHMETIC[@]}" \
    data.max_prompt_length=128 \
    data.max_response_length=24 \
    data.val_max_samples=64 \
    data.filter_accuracy=True \
    data.accuracy_lower_bound=0.2 \
    data.accuracy_upper_bound=0.8 \
    data.oversample_factor=2 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.actor.optim.lr=1e-5 \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.rollout.n=4 \
    algorithm.adv_estimator=rloo \
    algorithm.reward_dpo_coef=5 \
    algorithm.reward_gt_coef=5 \
    reward_model.model.path=default \
    reward_model.model.update=before \
    reward_model.model.beta_train=0.05 \
    reward_model.model.optim.lr=1e-6 \
    reward_model.model.optim.grad_clip=10.0 \
    reward_model.mini_batch_size=8 \
    reward_model.micro_batch_size_per_gpu=8 \
    trainer.project_name='verl_prime_recipe' \
    trainer.experiment_name='smollm2_arithmetic_prime' \
    trainer.test_freq=20 \
    trainer.total_training_steps=20 "$@"
