# Multi-turn GRPO on arithmetic with a calculator tool: SmolLM2-135M-Instruct learns to call the tool (CPU or GPU).
# Data: python3 recipe/calculator_agent/prepare_data.py --local_save_dir ~/data/arithmetic_calculator
# Watch agent_loop/tool_call_rate (trajectories with a valid call) and critic/score/mean rise (see README.md).
set -x
PROJECT_DIR="$(pwd)"

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/arithmetic_calculator/train.parquet \
    data.val_files=$HOME/data/arithmetic_calculator/test.parquet \
    data.train_batch_size=4 \
    data.max_prompt_length=320 \
    data.max_response_length=64 \
    data.return_raw_chat=True \
    data.val_max_samples=64 \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.optim.lr=2e-5 \
    actor_rollout_ref.actor.ppo_mini_batch_size=4 \
    actor_rollout_ref.actor.use_dynamic_bsz=True \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1024 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.dtype=float32 \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.agent.num_workers=2 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.015 \
    actor_rollout_ref.rollout.max_num_seqs=64 \
    actor_rollout_ref.rollout.temperature=0.7 \
    actor_rollout_ref.rollout.multi_turn.enable=True \
    actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3 \
    actor_rollout_ref.rollout.multi_turn.tool_config_path=$PROJECT_DIR/examples/agent_loop/config/tool_config/calculator_tool_config.yaml \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_agent_loop' \
    trainer.experiment_name='smollm2_calculator' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.val_before_train=True \
    trainer.save_freq=-1 \
    trainer.test_freq=20 \
    trainer.total_training_steps=20 "$@"
