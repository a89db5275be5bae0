# On-policy distillation (GKD, Agarwal et al., 2024, arXiv:2306.13649) on the built-in arithmetic task: the embedded
# SmolLM2-135M-Instruct (30 layers) teaches an 8-layer student cut from it. The student samples, the teacher scores
# every response token (its top-64 log-probs), the student minimises the reverse KL to it. CPU or one GPU; the
# teacher shares the student's devices (add trainer.placement.pools.teacher_pool=[1]
# trainer.placement.roles.teacher=teacher_pool to give it its own).
set -x
source "$(dirname "$0")/../smollm2_arithmetic.sh"

STUDENT=${STUDENT:-$(python3 -m recipe.gkd.make_student --teacher default --num_layers 8)}

python3 -m recipe.gkd.main_gkd \
    "${SMOLLM2_ARITHMETIC[@]}" \
    algorithm.adv_estimator=grpo \
    data.max_prompt_length=128 \
    data.max_response_length=24 \
    data.val_max_samples=64 \
    actor_rollout_ref.model.path="${STUDENT}" \
    actor_rollout_ref.teacher.model.path=default \
    actor_rollout_ref.teacher.topk=64 \
    actor_rollout_ref.actor.distill.loss_type=reverse_kl \
    actor_rollout_ref.actor.optim.lr=1e-5 \
    actor_rollout_ref.rollout.n=2 \
    trainer.project_name='verl_gkd_recipe' \
    trainer.experiment_name='smollm2_arithmetic_on_policy_distill' \
    trainer.test_freq=10 \
    trainer.total_training_steps=20 "$@"
