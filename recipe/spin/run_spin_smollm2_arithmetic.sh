# SPIN (Chen et al., 2024, arXiv:2401.01335) on the built-in arithmetic task with the embedded SmolLM2-135M-Instruct:
# the SFT target of each prompt (extra_info.answer, "#### <value>") against the model's own sample, with the model of
# the previous iteration as the reference. CPU or one GPU.
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"

python3 -m recipe.spin.main_spin \
    "${SMOLLM2_ARITHMETIC[@]}" \
    actor_rollout_ref.actor.use_dynamic_bsz=False \
    data.response_key=extra_info.answer \
    data.max_prompt_length=128 \
    data.max_response_length=24 \
    data.val_max_samples=64 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.rollout.n=1 \
    algorithm.dpo_beta=0.1 \
    algorithm.dpo_loss_type=sigmoid \
    trainer.ref_update_freq=1 \
    trainer.project_name='verl_spin_recipe' \
    trainer.experiment_name='smollm2_arithmetic_spin' \
    trainer.test_freq=10 \
    trainer.total_training_steps=20 "$@"
