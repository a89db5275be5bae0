# GRPO with long responses (1k prompt + 15k response tokens) and Ulysses sequence parallelism: every sequence's
# tokens are split over 2 GPUs in the actor, the reference (and a critic, if one runs): all follow
# actor.ulysses_sequence_parallel_size. Qwen2.5-0.5B has 14 query / 2 KV heads, so 2 divides both.
# Swap the data for a long chain-of-thought set (e.g. DAPO-Math); GSM8K keeps the command runnable as shipped.
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
#
# Memory settings for long sequences:
# - ppo_max_token_len_per_gpu is per GPU: a micro-batch holds up to 16384 * 2 tokens spread over the SP group;
#   the log-prob passes (no gradients) reuse it through the YAML's interpolation.
# - gradient checkpointing and remove-padding are required in practice (remove-padding is enforced for SP > 1).
# - the rollout prefills in chunks of max_num_batched_tokens and caps concurrent sequences (max_num_seqs) so the
#   KV cache of 16k-token generations fits in gpu_memory_utilization.
set -x

N_GPUS=${N_GPUS:-8}

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.train_batch_size=64 \
    data.max_prompt_length=1024 \
    data.max_response_length=15360 \
    data.filter_overlong_prompts=True \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.model.enable_gradient_checkpointing=True \
    actor_rollout_ref.actor.ulysses_sequence_parallel_size=2 \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=True \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.dtype=bfloat16 \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.enable_chunked_prefill=True \
    actor_rollout_ref.rollout.max_num_batched_tokens=16384 \
    actor_rollout_ref.rollout.max_num_seqs=128 \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_grpo_long_context' \
    trainer.experiment_name='qwen2_5_0_5b_sp2_16k' \
    trainer.n_gpus_per_node=$N_GPUS \
    trainer.nnodes=1 \
    trainer.save_freq=20 \
    trainer.test_freq=10 \
    trainer.total_training_steps=null \
    trainer.total_epochs=5 "$@"
