# KL-Cov (Cui et al., 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
# arXiv:2505.22617) on the built-in arithmetic task with the embedded SmolLM2-135M-Instruct: a KL penalty on a small
# fraction of high-covariance tokens keeps the policy's entropy from collapsing. CPU or one GPU.
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"
source "$(dirname "$0")/entropy_smollm2_arithmetic.sh"

python3 -m verl.trainer.main_ppo \
    "${SMOLLM2_ARITHMETIC[@]}" \
    "${ENTROPY_SMOLLM2_ARITHMETIC[@]}" \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
    actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov \
    actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.0002 \
    actor_rollout_ref.actor.policy_loss.ppo_kl_coef=0.1 \
    trainer.experiment_name='smollm2_arithmetic_kl_cov' "$@"
