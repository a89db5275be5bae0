# GRPO on GSM8K with the embedded SmolLM2-135M-Instruct, scored by the GSM8K rule plus a generative judge
# (docs/reward_model.md): SmolLM2 itself rates each answer from 0 to 10 on vLLM; score = rule + 0.5 * rating / 10.
# Unparsable judgments score 0 and are counted in reward/judge/parse_failures; a judge call slower than 300 s
# scores 0 for its samples (reward/judge/timeouts) instead of stopping the run.
# One GPU for training plus one free GPU for the judge; on CPU use rollout.name=hf for both.
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
set -x

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.val_max_samples=256 \
    data.train_batch_size=64 \
    data.max_prompt_length=384 \
    data.max_response_length=256 \
    data.filter_overlong_prompts=True \
    actor_rollout_ref.model.path=default \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    reward_model.enable=True \
    reward_model.use_reward_loop=True \
    reward_model.model.path=default \
    reward_model.rollout.name=vllm \
    reward_model.rollout.prompt_length=1024 \
    reward_model.rollout.response_length=32 \
    reward_model.rollout.gpu_memory_utilization=0.3 \
    reward_model.judge.system_prompt='You are a strict math grader.' \
    reward_model.judge.parser=last_number \
    reward_model.judge.default_score=0.0 \
    reward_model.judge.timeout=300 \
    reward_model.judge.on_error=fallback \
    '+reward_model.combine.weights={rule: 1.0, judge: 0.5}' \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_reward_model_example' \
    trainer.experiment_name='smollm2_135m_grpo_rule_plus_judge' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.save_freq=10 \
    trainer.test_freq=10 \
    trainer.total_training_steps=50 "$@"
