# GRPO on GSM8K with SmolLM2-135M-Instruct on the Megatron engine (tensor parallel over 2 GPUs), scored by the GSM8K
# rule plus a discriminative reward model on the Megatron engine too (docs/reward_model.md): score = rule + 0.1 *
# reward model. The reward model (Llama 3.2 based, its own tokenizer and chat template, so each chat is re-rendered
# for it) shares the actor's worker processes and so its layout (reward_model.megatron follows
# actor_rollout_ref.actor.megatron); its weights stay in host memory between uses (megatron.param_offload).
# SmolLM2's 9 / 3 heads are padded to 12 / 4 for TP=2 (see examples/grpo_trainer/run_smollm2_megatron_gsm8k.sh).
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
set -x
MODEL=${MODEL:-$HOME/models/SmolLM2-135M-Instruct-tp2}
python3 -m verl.models.mcore.pad_heads --src default --tp 2 --out "$MODEL"

python3 -m verl.trainer.main_ppo --config-name ppo_megatron_trainer \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.val_max_samples=256 \
    data.train_batch_size=64 \
    data.max_prompt_length=384 \
    data.max_response_length=256 \
    data.filter_overlong_prompts=True \
    actor_rollout_ref.model.path=$MODEL \
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.dtype=bfloat16 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    reward_model.enable=True \
    reward_model.model.path=Skywork/Skywork-Reward-V2-Llama-3.2-1B \
    reward_model.megatron.param_offload=True \
    reward_model.use_dynamic_bsz=True \
    reward_model.forward_max_token_len_per_gpu=8192 \
    reward_model.launch_reward_fn_async=True \
    '+reward_model.combine.weights={rule: 1.0, model: 0.1}' \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_reward_model_example' \
    trainer.experiment_name='smollm2_135m_grpo_megatron_rule_plus_rm' \
    trainer.n_gpus_per_node=2 \
    trainer.nnodes=1 \
    trainer.save_freq=-1 \
    trainer.test_freq=10 \
    trainer.total_training_steps=50 "$@"
