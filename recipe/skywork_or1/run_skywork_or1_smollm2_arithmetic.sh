# Skywork-OR1 (He et al., 2025, arXiv:2505.22312) on the built-in arithmetic task with the embedded
# SmolLM2-135M-Instruct: GRPO with adaptive entropy control, trained in stages of growing response length
# (config/stages_smollm2_arithmetic.yaml), each resuming the previous stage's checkpoint, by this one command.
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"

python3 -m recipe.skywork_or1.multi_stage \
    --stages "$(dirname "$0")/config/stages_smollm2_arithmetic.yaml" \
    "${SMOLLM2_ARITHMETIC[@]}" \
    algorithm.adv_estimator=grpo \
    data.val_max_samples=64 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.actor.optim.lr=1e-5 \
    actor_rollout_ref.actor.entropy_coeff=0.0 \
    actor_rollout_ref.actor.adaptive_entropy.enabled=True \
    actor_rollout_ref.actor.adaptive_entropy.target_entropy=0.2 \
    actor_rollout_ref.actor.adaptive_entropy.max_ent_coef=0.005 \
    actor_rollout_ref.actor.adaptive_entropy.min_ent_coef=0 \
    actor_rollout_ref.actor.adaptive_entropy.delta_ent_coef=0.0001 \
    actor_rollout_ref.rollout.n=4 \
    trainer.project_name='verl_skywork_or1_recipe' \
    trainer.experiment_name='smollm2_arithmetic_multi_stage' \
    trainer.test_freq=10 "$@"
