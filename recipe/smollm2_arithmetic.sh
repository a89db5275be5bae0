# Sourced by the recipes' run_*_smollm2_arithmetic.sh scripts (not run by itself): the overrides they all share.
# SMOLLM2_ARITHMETIC: the built-in arithmetic task (128-token prompts, 64 validation prompts), 8 prompts a step and
# a mini-batch, packed sequences in micro-batches by token count, an fp32 rollout (CPUs without native bf16 run it
# faster, and its log-probs match the fp32 actor's), on one node with one device, console and file logging, no
# checkpoints. A script puts its model, algorithm, lengths and run names after them (a later value wins).
# shellcheck disable=SC2034  # read by the sourcing script
SMOLLM2_ARITHMETIC=(
    data.train_files=arithmetic
    data.val_files=arithmetic
    data.max_prompt_length=128
    data.val_max_samples=64
    data.train_batch_size=8
    actor_rollout_ref.model.use_remove_padding=True
    actor_rollout_ref.actor.ppo_mini_batch_size=8
    actor_rollout_ref.actor.use_dynamic_bsz=True
    actor_rollout_ref.rollout.dtype=float32
    'trainer.logger=["console","file"]'
    trainer.n_gpus_per_node=1
    trainer.nnodes=1
    trainer.save_freq=-1
)
