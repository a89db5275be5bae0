# One-step off-policy GRPO on the built-in arithmetic task with the embedded SmolLM2-135M-Instruct.
# CPU (2 worker processes: 1 trainer + 1 rollout) or 2 GPUs. Generation of batch k+1 runs on the rollout pool while
# the trainer pool updates on batch k; weights go trainer -> rollout by broadcast (gloo on CPU, NCCL on GPU) each step
# and the one-step lag is corrected with the rollout's log-probs (truncated per-token importance weights).
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"

python3 -m recipe.one_step_off_policy.main_ppo \
    "${SMOLLM2_ARITHMETIC[@]}" \
    algorithm.adv_estimator=grpo \
    algorithm.rollout_correction.rollout_is=token \
    algorithm.rollout_correction.rollout_is_threshold=2.0 \
    data.max_prompt_length=128 \
    data.max_response_length=24 \
    data.val_max_samples=64 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.hybrid_engine=False \
    actor_rollout_ref.actor.optim.lr=1e-5 \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.calculate_log_probs=True \
    trainer.project_name='verl_one_step_off_recipe' \
    trainer.experiment_name='smollm2_arithmetic_one_step_off' \
    rollout.nnodes=1 \
    rollout.n_gpus_per_node=1 \
    trainer.test_freq=20 \
    trainer.total_training_steps=20 "$@"
