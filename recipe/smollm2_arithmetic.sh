# Sourced by the recipes' run_*_smollm2_arithmetic.sh scripts (not run by itself): the overrides they all share.
# SMOLLM2_ARITHMETIC: the built-in arithmetic task, 8 prompts a step and a mini-batch, on one node with one device,
# console and file logging, no checkpoints. A script puts its model, algorithm, lengths and run names after them.
# shellcheck disable=SC2034  # read by the sourcing script
SMOLLM2_ARITHMETIC=(
    data.train_files=arithmetic
    data.val_files=arithmetic
    data.train_batch_size=8
    actor_rollout_ref.actor.ppo_mini_batch_size=8
    'trainer.logger=["console","file"]'
    trainer.n_gpus_per_node=1
    trainer.nnodes=1
    trainer.save_freq=-1
)
