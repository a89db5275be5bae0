# Sourced by the entropy recipe's run_*_smollm2_arithmetic.sh scripts (not run by itself): their shared settings.
# ENTROPY_SMOLLM2_ARITHMETIC: GRPO with 4 samples a prompt and 24 response tokens, no fixed entropy bonus (each
# script brings its own entropy mechanism), 20 steps validated every 10 on 64 prompts.
# shellcheck disable=SC2034  # read by the sourcing script
ENTROPY_SMOLLM2_ARITHMETIC=(
    algorithm.adv_estimator=grpo
    data.max_response_length=24
    data.val_max_samples=64
    actor_rollout_ref.model.path=default
    actor_rollout_ref.actor.optim.lr=1e-5
    actor_rollout_ref.actor.entropy_coeff=0
    actor_rollout_ref.rollout.n=4
    trainer.project_name=verl_entropy_recipe
    trainer.test_freq=10
    trainer.total_training_steps=20
)
