# Skywork-OR1's adaptive entropy control (He et al., 2025, arXiv:2505.22312, sec. 3.2) on the built-in arithmetic task
# with the embedded SmolLM2-135M-Instruct: each step the entropy coefficient moves by delta_ent_coef towards holding
# the policy's entropy at target_entropy (within [min_ent_coef, max_ent_coef]); the bonus applies only while the
# entropy is at or below the target. CPU or one GPU.
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"
source "$(dirname "$0")/entropy_smollm2_arithmetic.sh"

python3 -m verl.trainer.main_ppo \
    "${SMOLLM2_ARITHMETIC[@]}" \
    "${ENTROPY_SMOLLM2_ARITHMETIC[@]}" \
    actor_rollout_ref.actor.adaptive_entropy.enabled=True \
    actor_rollout_ref.actor.adaptive_entropy.target_entropy=0.2 \
    actor_rollout_ref.actor.adaptive_entropy.max_ent_coef=0.005 \
    actor_rollout_ref.actor.adaptive_entropy.min_ent_coef=0 \
    actor_rollout_ref.actor.adaptive_entropy.delta_ent_coef=0.0001 \
    trainer.experiment_name='smollm2_arithmetic_adaptive_entropy' "$@"
